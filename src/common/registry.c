/* registry.c - the registry of caches: the list of every cache (newest
 * last), the locks that guard it and the making of caches, the count of walks
 * in progress, and its part of fork's lock order. The bottom of the common
 * layer: it calls no other file of it.
 * Locks, in order: walk_lock (counts walks; never held across one),
 * classes_lock (a layer above, across its usl_cache_create calls),
 * usl_sheaf_classes_lock and usl_cache_cache_lock (across the creation of a
 * sheaf class cache or of the kmem_cache cache), slab_mutex (the list, ids,
 * create and destroy). docs/ARCHITECTURE.md, "Locks, in order". */
#include "../testing.h"
#include "common.h"
#include "registry.h"

static pthread_mutex_t classes_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t usl_sheaf_classes_lock = PTHREAD_MUTEX_INITIALIZER;   /* usl_sheaf_class_caches[] */
pthread_mutex_t usl_cache_cache_lock = PTHREAD_MUTEX_INITIALIZER;     /* the kmem_cache cache's creation */
static pthread_mutex_t slab_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct usl_list cache_list = { &cache_list, &cache_list };

/* Walks of the caches (statistics) count themselves in `walkers` (under
 * walk_lock, which is not held while they call out: the callback may
 * allocate, and an allocation may create a class cache); a destroyed cache's
 * structure is freed only once no walk that may have seen it is running, and
 * fork waits for none to run. A mutex and a count rather than a read-write
 * lock: a forked child releases what its parent's prepare took, which a
 * read-write lock's writer check (glibc) does not allow. */
static pthread_mutex_t walk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t walk_done = PTHREAD_COND_INITIALIZER;
static unsigned int walkers;         /* under walk_lock */
static __thread unsigned int walks_here;   /* this thread's walks in progress */

static void walks_wait(void)         /* walk_lock held: all but this thread's own */
{
	usl_assert_held(&walk_lock);
	while (walkers > walks_here)
		pthread_cond_wait(&walk_done, &walk_lock);
}

void usl_registry_walk_begin(void)
{
	usl_lock(&walk_lock);
	walkers++;
	walks_here++;
	usl_unlock(&walk_lock);
}

void usl_registry_walk_end(void)
{
	usl_lock(&walk_lock);
	walks_here--;
	if (!--walkers)
		pthread_cond_broadcast(&walk_done);
	usl_unlock(&walk_lock);
}

void usl_registry_walks_wait(void)
{
	usl_lock(&walk_lock);
	walks_wait();
	usl_unlock(&walk_lock);
}

__thread int usl_registry_held __attribute__((tls_model("initial-exec")));

void usl_registry_lock(void)
{
	usl_lock(&slab_mutex);
	usl_registry_held++;
}

void usl_registry_unlock(void)
{
	usl_registry_held--;
	usl_unlock(&slab_mutex);
}

void usl_cache_classes_lock(void)
{
	usl_lock(&classes_lock);
	usl_registry_held++;
}

void usl_cache_classes_unlock(void)
{
	usl_registry_held--;
	usl_unlock(&classes_lock);
}

bool usl_registry_trylock(void)
{
	if (!usl_trylock(&slab_mutex))
		return false;
	usl_registry_held++;
	return true;
}

void usl_registry_each(void (*fn)(struct kmem_cache *s, void *arg), void *arg, enum usl_each order)
{
	usl_assert_held(&slab_mutex);
	if (order == USL_EACH_BACKWARD) {
		for (struct usl_list *it = cache_list.prev; it != &cache_list; it = it->prev)
			fn(usl_container_of(it, struct kmem_cache, list), arg);
		return;
	}
	/* Forward: one pass. Own last: the others, then uslab's own. */
	for (int internal = 0; internal < (order == USL_EACH_OWN_LAST ? 2 : 1); internal++)
		for (struct usl_list *it = cache_list.next; it != &cache_list; it = it->next) {
			struct kmem_cache *s = usl_container_of(it, struct kmem_cache, list);
			if (order == USL_EACH_FORWARD || !(s->flags & USL_SLAB_INTERNAL) == !internal)
				fn(s, arg);
		}
}

void usl_registry_fork_lock(void)
{
	usl_lock(&walk_lock);
	walks_wait();
	usl_stack_fork_lock();           /* a symbolizing thread allocates under it */
	usl_lock(&classes_lock);
	usl_lock(&usl_sheaf_classes_lock);
	usl_lock(&usl_cache_cache_lock);
	usl_lock(&slab_mutex);
}

void usl_registry_fork_unlock(void)

{
	usl_unlock(&slab_mutex);
	usl_unlock(&usl_cache_cache_lock);
	usl_unlock(&usl_sheaf_classes_lock);
	usl_unlock(&classes_lock);
	usl_stack_fork_unlock();
	usl_unlock(&walk_lock);
}

bool usl_registry_is_held(void)
{
	return usl_held(&slab_mutex);
}

void usl_registry_add(struct kmem_cache *s)
{
	usl_assert_held(&slab_mutex);
	usl_list_add_tail(&s->list, &cache_list);
}

void usl_registry_del(struct kmem_cache *s)
{
	usl_assert_held(&slab_mutex);
	usl_list_del(&s->list);
}

struct kmem_cache *usl_registry_find(bool (*match)(const struct kmem_cache *s, void *arg), void *arg)
{
	usl_assert_held(&slab_mutex);
	for (struct usl_list *it = cache_list.prev; it != &cache_list; it = it->prev) {
		struct kmem_cache *s = usl_container_of(it, struct kmem_cache, list);
		if (match(s, arg))
			return s;
	}
	return NULL;
}
