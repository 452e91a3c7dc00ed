/* fuzz_tunables.c - libFuzzer target for SLAB's tunables as a program writes
 * them: the kernel's /proc/slabinfo line (uslab_slabinfo_write, "name limit
 * batchcount shared") and the attribute "tunables" (uslab_cache_attr_write).
 * The input's first byte chooses: below 0x40 the rest goes to the attribute of
 * a SLAB cache, else the whole input is a slabinfo line. Whatever it says, a
 * refusal is -1 with EINVAL, ENOENT or EOPNOTSUPP and changes nothing; an
 * acceptance leaves 1 <= batchcount <= limit; the cache still allocates and
 * frees; every report is one line. Built with clang -fsanitize=fuzzer,address
 * in the AddressSanitizer build; uslab runs with USLAB_ALLOCATOR=slab (set
 * before its start-up). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uslab.h"

static struct kmem_cache *s, *slub;

static void one_line(enum uslab_error kind, const char *line, void *arg)
{
	(void)kind;
	(void)arg;
	if (strncmp(line, "uslab: ", 7) != 0 || strchr(line, '\n'))
		abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("USLAB_ALLOCATOR", "slab", 1);
	uslab_set_report_handler(one_line, NULL);
	s = kmem_cache_create("fz-slab", 96, 0, SLAB_NO_MERGE, NULL);
	slub = kmem_cache_create("fz-debug", 96, 0, SLAB_NO_MERGE | SLAB_POISON, NULL);
	if (!s || !slub || strcmp(uslab_allocator(), "slab") != 0)
		abort();
	return 0;
}

static void tunables(struct kmem_cache *c, unsigned long v[3])
{
	char buf[64];
	if (uslab_cache_attr(c, "tunables", buf, sizeof(buf)) <= 0 || sscanf(buf, "%lu %lu %lu", &v[0], &v[1], &v[2]) != 3)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char line[256];
	size_t n = size < sizeof(line) - 1 ? size : sizeof(line) - 1;
	memcpy(line, data, n);
	line[n] = 0;
	unsigned long before[3], after[3];
	tunables(s, before);
	errno = 0;
	int r = n && line[0] < 0x40 ? uslab_cache_attr_write(n && line[0] & 1 ? slub : s, "tunables", line + 1)
	                            : uslab_slabinfo_write(line);
	if (r != 0 && r != -1)
		abort();
	tunables(s, after);
	if (r == -1) {
		if (errno != EINVAL && errno != ENOENT && errno != EOPNOTSUPP && errno != ENOMEM)
			abort();
		if (memcmp(before, after, sizeof(before)))
			abort();
	} else if (after[0] < 1 || after[1] < 1 || after[1] > after[0]) {
		abort();
	}
	void *p[8];
	for (int i = 0; i < 8; i++)
		if (!(p[i] = kmem_cache_alloc(s, GFP_KERNEL)))
			abort();
	for (int i = 0; i < 8; i++)
		kmem_cache_free(s, p[i]);
	return 0;
}
