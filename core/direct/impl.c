/* The direct data path's C source, compiled into this package (the same
 * file the interposer compiles: one implementation of the protocol). */
#include "../../preload/c/direct.c"
#include "../../preload/c/tenant.c"
