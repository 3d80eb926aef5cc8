# solution: softmax-kernel
# fails: 
# says: 
# Correct, written differently: x made contiguous first, so the row stride is n_cols; the max taken with
# tl.where instead of `other`.
@triton.jit
def softmax_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=inside).to(tl.float32)
    x = tl.where(inside, x, -float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, e / tl.sum(e, axis=0), mask=inside)


def softmax_rows(x):
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = x.new_empty(n_rows, n_cols)
    softmax_kernel[(n_rows,)](out, x, n_cols, n_cols, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out
