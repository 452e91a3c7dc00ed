/* registry.h - what the common layer's files lend each other and nothing
 * else includes: the registry (registry.c: its locks, its list, the count of
 * walks, its part of fork's lock order), the ids and the path a cache takes
 * (path.c), the reclaim's hooks (reclaim.c) and the fork handlers (fork.c).
 * The files stand in that order, each calling only those before it, and
 * cache.c on top. */
#ifndef USL_COMMON_REGISTRY_H
#define USL_COMMON_REGISTRY_H

#include "common.h"

/* ---- the registry (registry.c) ---- */
extern pthread_mutex_t usl_sheaf_classes_lock USL_HIDDEN;   /* the sheaf class caches' creation */
extern pthread_mutex_t usl_cache_cache_lock USL_HIDDEN;     /* the kmem_cache cache's creation */
USL_HIDDEN void usl_registry_lock(void);       /* slab_mutex */
USL_HIDDEN void usl_registry_unlock(void);
USL_HIDDEN bool usl_registry_trylock(void);
USL_HIDDEN bool usl_registry_is_held(void);    /* by this thread: for assertions */
/* s onto the list (newest last), or off it; slab_mutex held. */
USL_HIDDEN void usl_registry_add(struct kmem_cache *s);
USL_HIDDEN void usl_registry_del(struct kmem_cache *s);
/* The newest cache match(s, arg) accepts, or NULL; slab_mutex held. */
USL_HIDDEN struct kmem_cache *usl_registry_find(bool (*match)(const struct kmem_cache *s, void *arg), void *arg);
/* A walk of the caches counts itself (begin, end); a destroy waits until no
 * walk but this thread's own runs. */
USL_HIDDEN void usl_registry_walk_begin(void);
USL_HIDDEN void usl_registry_walk_end(void);
USL_HIDDEN void usl_registry_walks_wait(void);
/* fn(s, arg) on every cache on the list, slab_mutex held: in list order,
 * backwards, or uslab's own caches last (the others' flushes free their
 * sheaves into them). */
enum usl_each { USL_EACH_FORWARD, USL_EACH_BACKWARD, USL_EACH_OWN_LAST };
USL_HIDDEN void usl_registry_each(void (*fn)(struct kmem_cache *s, void *arg), void *arg, enum usl_each order);
/* fork: no walk in progress, then the registry's locks in their order
 * (walk_lock, the stack symbolizer's, classes_lock, sheaf_classes_lock,
 * cache_cache_lock, slab_mutex); the release, backwards. */
USL_HIDDEN void usl_registry_fork_lock(void);
USL_HIDDEN void usl_registry_fork_unlock(void);

/* ---- ids and paths (path.c) ---- */
extern unsigned int usl_ids_end USL_HIDDEN;   /* one past the highest id given */
/* The lowest free id for s, its slots zeroed and s->cpu_slab at them; false
 * when the slot area cannot be mapped or every id is taken. */
USL_HIDDEN bool usl_id_assign(struct kmem_cache *s);
USL_HIDDEN void usl_id_release(struct kmem_cache *s);
USL_HIDDEN size_t usl_ids_max(void);           /* ids the slot area holds */
USL_HIDDEN void usl_path_set(struct kmem_cache *s, bool owned);
USL_HIDDEN void usl_path_retire(struct kmem_cache *s);
USL_HIDDEN void usl_entries_after_fork(void);

/* ---- reclaim (reclaim.c) and fork (fork.c) ---- */
USL_HIDDEN void usl_fork_init(void);          /* the pthread_atfork handlers, once */
USL_HIDDEN void usl_reclaim_before_grow(void);
USL_HIDDEN void usl_reclaim_after_fork(void);

#endif /* USL_COMMON_REGISTRY_H */
