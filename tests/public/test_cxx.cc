// test_cxx.cc - C++ operator new and delete on uslab (linked statically with
// the malloc override): every form lands in uslab, aligned new honours its
// alignment, nothrow new returns nullptr, throwing new calls the new handler
// and then throws std::bad_alloc, and containers work.
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

extern "C" {
#include "uslab.h"
}

static int pass, fail;
#define CHECK(e) ((e) ? (void)pass++ : (void)(fail++, std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #e)))

// uslab knows the block (ksize reports nothing and returns its size).
static bool ours(const void *p)
{
	unsigned long before = uslab_error_count();
	return ksize(p) > 0 && uslab_error_count() == before;
}

struct alignas(256) Wide {
	char b[300];
};

static int handler_calls;
static void handler()
{
	handler_calls++;
	std::set_new_handler(nullptr);      // the next failure throws
}

int main()
{
	int *i = new int(42);
	CHECK(ours(i) && *i == 42);
	delete i;
	char *a = new char[1000];
	CHECK(ours(a) && ksize(a) >= 1000);
	delete[] a;
	Wide *w = new Wide;
	CHECK(ours(w) && reinterpret_cast<std::uintptr_t>(w) % 256 == 0);
	delete w;
	Wide *wa = new Wide[5];
	CHECK(reinterpret_cast<std::uintptr_t>(wa) % 256 == 0);
	delete[] wa;
	int *nt = new (std::nothrow) int[10];
	CHECK(ours(nt));
	delete[] nt;

	// Impossible sizes: nothrow gives nullptr; the throwing form calls the
	// handler, then throws std::bad_alloc.
	std::size_t huge = SIZE_MAX / 4;
	char *none = new (std::nothrow) char[huge];
	CHECK(none == nullptr);
	bool threw = false;
	std::set_new_handler(handler);
	try {
		char *x = new char[huge];
		delete[] x;
	} catch (const std::bad_alloc &) {
		threw = true;
	}
	CHECK(threw && handler_calls == 1);

	// Containers: many small nodes, growth by reallocation, strings.
	std::map<int, std::string> m;
	for (int k = 0; k < 100000; k++)
		m[k] = std::to_string(k * 7);
	std::vector<std::unique_ptr<std::vector<int>>> vv;
	for (int k = 0; k < 2000; k++)
		vv.emplace_back(new std::vector<int>(static_cast<std::size_t>(k), k));
	long sum = 0;
	for (auto &p : vv)
		sum += static_cast<long>(p->size());
	CHECK(m.size() == 100000 && m[777] == "5439" && sum == 1999L * 2000 / 2);
	CHECK(ours(vv[1000].get()));

	std::printf("%d passed, %d failed\n", pass, fail);
	return fail ? 1 : 0;
}
