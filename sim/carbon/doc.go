// Package carbon embeds real hourly carbon intensity of eight US grids for
// 2022 (EIA-930 via SustainDC, see data/README.md) and cuts windows of it
// for the simulator's carbon zones.
//
// Files are read strictly: the header timestamp_utc,gco2_per_kwh, then
// exactly one row per hour of 2022 in order (8,760 rows), each value empty
// (the source has no data for that hour) or a finite number in
// [0, MaxIntensity].
//
// Gaps are handled by one documented rule, never by inventing a curve:
//
//   - a run of at most MaxFillHours missing hours with measured hours on
//     both sides is filled by linear interpolation between those two hours
//     (in time: the k-th of n missing hours gets a + (b-a)·k/(n+1));
//   - a longer run, or one touching the start or end of the year, stays
//     missing: Window refuses (ErrGap) any window that covers one of its
//     hours, naming the gap, so a scenario must pick another start.
//
// Series values are immutable once loaded and shared: Load caches each
// grid, and Series and its slices must not be modified. Everything here is
// safe for concurrent use.
package carbon
