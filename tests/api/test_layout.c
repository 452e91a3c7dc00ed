/* test_layout.c - the layout test lives in tests/public/test_layout.c; bench/
 * builds uslab-layout from this path, which forwards to it until bench/ names
 * the new one. */
#include "../public/test_layout.c"
