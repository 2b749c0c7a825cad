package sim

// SetFlap puts zone z's uplink in or out of a flap (tests only).
func SetFlap(st *State, z int, on bool) { st.flap[z] = on }
