/* rss.h - the process's resident set in KiB, from /proc/self/statm, for the
 * benchmarks and the tests. Read with system calls only: no allocation (a
 * test may call it while it says the program is idle) and no stdio (which
 * would map libc pages into the set it measures). 0 if it cannot be read. */
#ifndef USLAB_TOOLS_RSS_H
#define USLAB_TOOLS_RSS_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline long rss_kib(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *resident = strchr(buf, ' ');   /* the second field */
	return resident ? strtol(resident, NULL, 10) * (sysconf(_SC_PAGESIZE) / 1024) : 0;
}

#endif /* USLAB_TOOLS_RSS_H */
