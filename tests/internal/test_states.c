/* test_states.c - the slab state machine of seed 001, step by step, on one
 * pinned CPU: only the cpu slab is frozen; cpu partial slabs are neither frozen
 * nor flagged; node partial slabs carry the flag; full slabs are nowhere.
 * Pinned to the CPU it starts on, so one slot sees every operation. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>

#include "../harness.h"
#include "arch/arch.h"
#include "pages/pages.h"
#include "testing.h"

static struct kmem_cache_cpu *my_slot(struct kmem_cache *s)
{
	return &s->cpu_slab[sched_getcpu()];
}

static bool frozen(struct slab *slab) { return usl_counters_frozen(slab->counters); }

enum { MAXO = 20000 };
static void *objs[MAXO];   /* the objects allocated (NULL: freed) */
static unsigned int nobjs;

/* 1.-4.: the cpu slab, full, cpu partial and frozen again; n objects a slab. */
static void check_cpu_slab_states(struct kmem_cache *s, unsigned int n)
{
	struct usl_state_counts st;

	/* 1. The first allocation makes a new slab the (frozen) cpu slab. */
	objs[nobjs++] = kmem_cache_alloc(s, GFP_KERNEL);
	struct slab *first = usl_virt_to_slab(objs[0]);
	CHECK(my_slot(s)->slab == first);
	CHECK(frozen(first) && !first->node_partial);
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.cpu_slabs, 1);
	CHECK_EQ(st.total, 1);

	/* 2. Exhausting it: the next allocation leaves it full (unfrozen, on no
	 *    list) and freezes a new cpu slab. */
	while (nobjs < n + 1)
		objs[nobjs++] = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(usl_virt_to_slab(objs[n]) != first);
	CHECK(!frozen(first) && !first->node_partial && first->freelist == NULL);
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.full, 1);
	CHECK_EQ(st.cpu_slabs, 1);

	/* 3. A free into a full slab puts it on this CPU's partial list, unfrozen. */
	kmem_cache_free(s, objs[0]);
	objs[0] = NULL;
	CHECK(my_slot(s)->partial == first);
	CHECK(!frozen(first) && !first->node_partial);
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.cpu_partial, 1);
	CHECK_EQ(st.full, 0);

	/* 4. The next slow allocation takes the cpu partial slab and freezes it. */
	while (my_slot(s)->freelist ||
	       (my_slot(s)->slab && usl_counters_uncarved(usl_load(&my_slot(s)->slab->counters))))
		objs[nobjs++] = kmem_cache_alloc(s, GFP_KERNEL);
	objs[nobjs++] = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(my_slot(s)->slab == first && frozen(first));
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.cpu_partial, 0);
}

/* 5. Fill many slabs, then free one object of each full slab: the cpu
 *    partial list grows to its limit and is drained to the node list, whose
 *    slabs carry the flag and are not frozen. */
static void check_drain_to_node(struct kmem_cache *s, unsigned int n)
{
	struct usl_state_counts st;
	unsigned int slabs = s->cpu_partial_slabs * 3 + 2;
	while (nobjs < (slabs + 3) * n && nobjs < MAXO)
		objs[nobjs++] = kmem_cache_alloc(s, GFP_KERNEL);
	struct slab *cur = my_slot(s)->slab;
	for (unsigned int i = 0; i < nobjs; i++) {
		struct slab *sl;
		if (!objs[i])
			continue;
		sl = usl_virt_to_slab(objs[i]);
		if (sl == cur || sl->freelist || frozen(sl))
			continue;
		kmem_cache_free(s, objs[i]);
		objs[i] = NULL;
	}
	usl_slub_state_counts(s, &st);
	CHECK(st.cpu_partial >= 1 && st.cpu_partial <= s->cpu_partial_slabs);
	CHECK(st.node_partial >= 1);
	int bad = 0;
	for (struct usl_list *it = s->node[0]->partial.next; it != &s->node[0]->partial; it = it->next) {
		struct slab *sl = usl_container_of(it, struct slab, slab_list);
		bad += !sl->node_partial || frozen(sl);
	}
	CHECK_EQ(bad, 0);
	bad = 0;
	for (struct slab *p = my_slot(s)->partial; p; p = p->next)
		bad += p->node_partial || frozen(p);
	CHECK_EQ(bad, 0);
}

/* 5b. Shrink with live objects: returns 1, frees no slab that has objects,
 *     and orders the node list fewest free objects first (all of these
 *     slabs have at most 32 free, so all are promoted). */
static void check_shrink_live(struct kmem_cache *s)
{
	struct usl_state_counts st;
	CHECK_EQ(kmem_cache_shrink(s), 1);
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.cpu_slabs + st.cpu_partial, 0);
	CHECK_EQ(st.empty_node_partial, 0);
	unsigned int prev_free = 0;
	int bad = 0;
	for (struct usl_list *it = s->node[0]->partial.next; it != &s->node[0]->partial; it = it->next) {
		struct slab *sl = usl_container_of(it, struct slab, slab_list);
		unsigned int f = usl_counters_objects(sl->counters) - usl_counters_inuse(sl->counters);
		bad += f < prev_free || f == 0;
		prev_free = f;
	}
	CHECK_EQ(bad, 0);
}

int main(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	CHECK(sched_setaffinity(0, sizeof(set), &set) == 0);   /* the CPU we are on is allowed */
	struct kmem_cache *s = kmem_cache_create("states", 256, 0, 0, NULL);
	unsigned int n = s->objects;
	struct usl_state_counts st;

	check_cpu_slab_states(s, n);
	check_drain_to_node(s, n);
	check_shrink_live(s);

	/* 6. Free everything: empty slabs beyond min_partial are given back. */
	for (unsigned int i = 0; i < nobjs; i++)
		if (objs[i])
			kmem_cache_free(s, objs[i]);
	usl_slub_state_counts(s, &st);
	CHECK(st.node_partial <= s->min_partial);
	CHECK(st.total <= s->min_partial + st.cpu_partial + st.cpu_slabs);
	CHECK_EQ(st.full, 0);

	/* 7. Shrink: every slab is flushed and given back. */
	CHECK_EQ(kmem_cache_shrink(s), 0);
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.total, 0);
	CHECK(my_slot(s)->slab == NULL && my_slot(s)->partial == NULL);

	/* 8. Remote free into the cpu slab of this CPU from another thread's view:
	 *    a frozen slab takes frees without any list change. */
	void *a = kmem_cache_alloc(s, GFP_KERNEL);
	struct slab *cs = my_slot(s)->slab;
	CHECK(frozen(cs));
	kmem_cache_destroy(s);  /* a is live: refused */
	kmem_cache_free(s, a);
	kmem_cache_destroy(s);
	CHECK_EQ(uslab_error_count(), 1);
	return test_summary();
}
