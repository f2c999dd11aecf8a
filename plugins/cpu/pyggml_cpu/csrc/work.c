/* Work memory per node: a shared area (converted activations, expert lists) and a per-thread scratch. */
#include "pgc.h"

size_t pgc_mul_mat_shared(const pgc_node *n);
size_t pgc_mul_mat_id_shared(const pgc_node *n);
size_t pgc_blas_shared(const pgc_node *n);
size_t pgc_out_prod_shared(const pgc_node *n, int nth); /* outprod.c: the packed panels */
size_t pgc_flash_attn_shared(const pgc_node *n, int nth); /* attn.c: the key parts' partial results */
size_t pgc_flash_attn_thread(const pgc_node *n);             /* attn.c: the blocks of queries, keys and values */

size_t pgc_work_shared(const pgc_node *n, int nth) {
    switch (n->op) {
    case PGC_OP_MUL_MAT: return pgc_mul_mat_shared(n);
    case PGC_OP_MUL_MAT_ID: return pgc_mul_mat_id_shared(n);
    case PGC_OP_MUL_MAT_BLAS: return pgc_blas_shared(n);
    case PGC_OP_OUT_PROD: return pgc_out_prod_shared(n, nth);
    case PGC_OP_FLASH_ATTN: return pgc_flash_attn_shared(n, nth);
    case PGC_OP_CROSS_ENTROPY_LOSS: return pgc_train_shared(n, nth); /* backward.c */
    case PGC_OP_CONV_2D: case PGC_OP_CONV_3D: return pgc_conv_shared(n, nth); /* conv.c */
    default: return 0;
    }
}

size_t pgc_work_thread(const pgc_node *n) {
    int64_t m = 0;
    for (int s = 0; s < PGC_NSLOT; s++)
        if (n->data[s] && n->ne[s][0] > m) m = n->ne[s][0];
    size_t t = (size_t)(16 * m + 4096);
    if (n->op == PGC_OP_FLASH_ATTN) return pgc_flash_attn_thread(n) > t ? pgc_flash_attn_thread(n) : t;
    if (n->op == PGC_OP_MUL_MAT && n->type[1] == T_F16 && n->ne[1][0] <= F16_PANEL_MAX_K) { /* matmul.c's F16 panels */
        const size_t panel = (size_t)F16_PANEL_ROWS * sizeof(float) * (size_t)n->ne[1][0] + 64;
        if (panel > t) t = panel;
    }
    return t;
}
