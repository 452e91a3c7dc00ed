/* topology.h - the NUMA topology (topology.c), below the rest of the platform
 * layer: which nodes exist and which node each CPU is on, read once at
 * start-up from /sys/devices/system/node (or USLAB_NODES=N's fake one), the
 * small sysfs readers and list parser the CPU counts use too, and the binding
 * of memory to a node through libnuma. Node ids run from 0 to usl_nr_nodes - 1
 * (sparse ids keep their numbers); a node above USL_MAX_NODES - 1 is counted
 * as node 0. docs/ARCHITECTURE.md, "NUMA". */
#ifndef USL_TOPOLOGY_H
#define USL_TOPOLOGY_H

#include "../types.h"

#define USL_MAX_CPUS 8192
extern unsigned int usl_nr_nodes USL_HIDDEN;    /* highest possible node id + 1 */
extern uint64_t usl_nodes_online USL_HIDDEN;    /* a bit per node that exists (online) */
extern bool usl_numa_bind USL_HIDDEN;           /* the real topology, more than one node, and
                                                   libnuma loaded: new regions' pages are
                                                   bound to their node (pages.c) */
extern uint8_t usl_cpu_node[USL_MAX_CPUS] USL_HIDDEN;   /* the node of each CPU id */
/* Read the topology for nr_cpus CPU ids: fake (fake_nodes > 0: CPU i on node
 * i % fake_nodes) or the machine's. Returns the highest node id the machine
 * named (above USL_MAX_NODES - 1: the caller reports it), 0 for one node. */
USL_HIDDEN long usl_topology_init(unsigned int nr_cpus, int fake_nodes);
/* Bind [addr, addr + len) to the node (MPOL_PREFERRED, through libnuma's
 * mbind); false if libnuma is not loaded or the kernel refuses. */
USL_HIDDEN bool usl_numa_bind_range(void *addr, size_t len, unsigned int node);
static inline bool usl_node_valid(int nid)
{
	return nid >= 0 && nid < USL_MAX_NODES && ((usl_nodes_online >> nid) & 1);
}
static inline unsigned int usl_node_of_cpu(int cpu)
{
	return cpu >= 0 && cpu < USL_MAX_CPUS ? usl_cpu_node[cpu] : 0;
}
/* A small sysfs file into buf (a C string); false if unreadable or empty. */
USL_HIDDEN bool usl_sysfs_read(const char *path, char *buf, size_t size);
/* The ranges of a sysfs list ("0-3,8-11") to each(lo, hi, arg); false where
 * an id is absurd (above 2^20). */
USL_HIDDEN bool usl_list_ranges(const char *buf, void (*each)(long lo, long hi, void *arg), void *arg);

#endif /* USL_TOPOLOGY_H */
