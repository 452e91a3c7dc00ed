/* test_platform.c - what start-up reads from the system without sysconf: the
 * sysfs CPU-list parser (usl_cpu_list), the CPU counts it gives, and the page
 * size from the aux vector, against glibc's own answers. */
#include <fcntl.h>
#include "../harness.h"
#include "pages/pages.h"
#include "platform/platform.h"
#include "testing.h"

/* Writes text to a scratch file and parses it. */
static bool parse(const char *text, long *max, long *count)
{
	char path[] = "/tmp/uslab-cpulist-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return false;
	bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	ok = ok && usl_cpu_list(path, max, count);
	unlink(path);
	return ok;
}

int main(void)
{
	long max = 0, count = 0;

	CHECK(parse("0\n", &max, &count));
	CHECK_EQ(max, 0);
	CHECK_EQ(count, 1);
	CHECK(parse("0-3,8-11\n", &max, &count));
	CHECK_EQ(max, 11);
	CHECK_EQ(count, 8);
	CHECK(parse("0-1", &max, &count));   /* no newline */
	CHECK_EQ(max, 1);
	CHECK_EQ(count, 2);
	CHECK(parse("2,4-5,7\n", &max, &count));
	CHECK_EQ(max, 7);
	CHECK_EQ(count, 4);
	char longlist[2048] = "";         /* every other id up to 510: longer than 256 bytes */
	for (int id = 0; id <= 510; id += 2)
		snprintf(longlist + strlen(longlist), sizeof(longlist) - strlen(longlist), "%s%d", id ? "," : "", id);
	CHECK(strlen(longlist) > 900);
	CHECK(parse(longlist, &max, &count));
	CHECK_EQ(max, 510);
	CHECK_EQ(count, 256);
	CHECK(!parse("", &max, &count));
	CHECK(!parse("\n", &max, &count));
	CHECK(!parse("99999999999\n", &max, &count));   /* absurd id: refused, not wrapped */
	CHECK(!usl_cpu_list("/nonexistent/uslab/cpu/list", &max, &count));

	/* The counts start-up took agree with glibc's (which reads sysfs its own way). */
	usl_ensure_init();
	long conf = sysconf(_SC_NPROCESSORS_CONF), onln = sysconf(_SC_NPROCESSORS_ONLN);
	CHECK(usl_nr_cpus >= 1);
	CHECK((long)usl_nr_cpus >= conf);             /* ids may be sparse: max + 1 >= count */
	CHECK_EQ(usl_online_cpus, onln < (long)usl_nr_cpus ? onln : (long)usl_nr_cpus);
	CHECK_EQ(usl_os_page_size(), sysconf(_SC_PAGESIZE));
	CHECK_EQ(USL_PAGE_SIZE, sysconf(_SC_PAGESIZE));
	return test_summary();
}
