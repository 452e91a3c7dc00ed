/* mt_prog.c - a multithreaded malloc workload for the LD_PRELOAD test: producer
 * threads pass blocks to consumer threads through a locked queue, every thread
 * also churns its own blocks; prints a checksum of everything it saw, which does
 * not depend on the allocator or the interleaving. Not linked with uslab. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PAIRS = 4, ITEMS = 200000, QCAP = 1024 };
struct queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *item[QCAP];
	size_t head, tail;
};
static struct queue q[PAIRS];
static uint64_t sums[PAIRS];

static size_t item_size(unsigned i) { return 1 + (i * 2654435761u) % 3000; }

static void *producer(void *arg)
{
	struct queue *qu = arg;
	char *own[64] = { 0 };
	for (unsigned i = 0; i < ITEMS; i++) {
		size_t n = item_size(i);
		char *p = malloc(n);
		memset(p, (int)(i & 0xff), n);
		pthread_mutex_lock(&qu->lock);
		while (qu->tail - qu->head == QCAP)
			pthread_cond_wait(&qu->cond, &qu->lock);
		qu->item[qu->tail++ % QCAP] = p;
		pthread_cond_broadcast(&qu->cond);
		pthread_mutex_unlock(&qu->lock);
		free(own[i % 64]);
		own[i % 64] = malloc(item_size(i + 7) * 3);
	}
	for (int i = 0; i < 64; i++)
		free(own[i]);
	return NULL;
}

static void *consumer(void *arg)
{
	int k = (int)(intptr_t)arg;
	struct queue *qu = &q[k];
	uint64_t sum = 0;
	for (unsigned i = 0; i < ITEMS; i++) {
		pthread_mutex_lock(&qu->lock);
		while (qu->tail == qu->head)
			pthread_cond_wait(&qu->cond, &qu->lock);
		char *p = qu->item[qu->head++ % QCAP];
		pthread_cond_broadcast(&qu->cond);
		pthread_mutex_unlock(&qu->lock);
		size_t n = item_size(i);
		for (size_t j = 0; j < n; j += 61)
			sum += (unsigned char)p[j] ^ j;
		char *r = realloc(p, n / 2 + 1);      /* shrink, then free */
		sum += (unsigned char)r[0];
		free(r);
	}
	sums[k] = sum;
	return NULL;
}

int main(void)
{
	pthread_t t[2 * PAIRS];
	for (int i = 0; i < PAIRS; i++) {
		pthread_mutex_init(&q[i].lock, NULL);
		pthread_cond_init(&q[i].cond, NULL);
		pthread_create(&t[2 * i], NULL, producer, &q[i]);
		pthread_create(&t[2 * i + 1], NULL, consumer, (void *)(intptr_t)i);
	}
	for (int i = 0; i < 2 * PAIRS; i++)
		pthread_join(t[i], NULL);
	uint64_t total = 0;
	for (int i = 0; i < PAIRS; i++)
		total = total * 31 + sums[i];
	printf("checksum %llu\n", (unsigned long long)total);
	return 0;
}
