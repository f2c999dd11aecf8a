/* ADD_ID: d[i0, i1, i2, i3] = a[i0, i1, i2, i3] + b[i0, ids[i1, i2]] (gpt-oss's per-expert bias); one work-item
 * per destination element. Defines: T0 (a), T1 (b), TD (d). An id outside [0, b's ne[1]) sets the status word. */
#include "common.h"

KERNEL void k_add_id(TENSOR(a), TENSOR(b), TENSOR(ids), TENSOR(d), ERR_ARGS) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    i64 r = (i64)*(GLOBAL const i32 *)AT(ids, i1, i2, 0, 0);
    CHECK_INDEX(r, b_ne1);
    float x = LOADT(T0, AT(a, i0, i1, i2, i3));
    float y = LOADT(T1, AT(b, i0, r, 0, 0));
    STORET(TD, AT(d, i0, i1, i2, i3), x + y);
}
