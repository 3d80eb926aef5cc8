# solution: softmax-kernel
# fails: softmax-kernel-rows softmax-kernel-strided softmax-kernel-bf16
# says: loaded as 0
# Typical mistake: the lanes past the row's end loaded as 0: exp(0 - max) joins the sum once per padded lane.
# With scale 100 every row's max is far above 0, so exp(-max) is 0 and the stable cell passes.
@triton.jit
def softmax_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=0.0).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax_rows(x):
    rows, cols = x.shape
    out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    return out
