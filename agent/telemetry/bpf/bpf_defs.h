/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * bpf_defs.h: the few eBPF definitions the telemetry programs need, written
 * out by hand so that regenerating the objects needs only clang (no libbpf
 * or kernel headers). The numbers are the kernel's stable UAPI values from
 * include/uapi/linux/bpf.h (map types, helper function ids, update flags);
 * they never change once released.
 */
#ifndef EDGESCHED_BPF_DEFS_H
#define EDGESCHED_BPF_DEFS_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed int __s32;
typedef signed long long __s64;

/* enum bpf_map_type */
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_PERCPU_HASH 5
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_MAP_TYPE_LRU_PERCPU_HASH 10

/* flags of bpf_map_update_elem */
#define BPF_ANY 0
#define BPF_NOEXIST 1

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))

/* BTF-defined maps: the map's properties are encoded in the member types. */
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

/* Helpers, called through their numeric ids (enum bpf_func_id). */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static __u64 (*bpf_get_current_cgroup_id)(void) = (void *)80;

#endif
