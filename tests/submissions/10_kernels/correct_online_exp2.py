# solution: softmax-kernel
# fails: 
# says: 
# Correct, written differently: a fixed BLOCK of 64 looping over the row, a running max and sum (online
# softmax), exp2 with log2(e) folded in, torch.empty_like.
@triton.jit
def softmax_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    log2e = 1.4426950408889634
    top = -float("inf")
    total = 0.0
    for start in range(0, n_cols, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + offsets, mask=offsets < n_cols, other=-float("inf"))
        x = x.to(tl.float32) * log2e
        new_top = tl.maximum(top, tl.max(x, axis=0))
        total = total * tl.exp2(top - new_top) + tl.sum(tl.exp2(x - new_top), axis=0)
        top = new_top
    for start in range(0, n_cols, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + offsets, mask=offsets < n_cols, other=-float("inf"))
        y = tl.exp2(x.to(tl.float32) * log2e - top) / total
        tl.store(out_ptr + row * out_row_stride + offsets, y, mask=offsets < n_cols)


def softmax_rows(x):
    out = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1], BLOCK=64)
    return out
