# solution: softmax-kernel
# fails: 
# says: 
# Correct, written differently: the kernel writes a float32 buffer, converted to x's dtype afterwards (data
# movement, no maths in torch); the reciprocal of the sum multiplied in.
@triton.jit
def softmax_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    row = tl.load(x_ptr + pid * x_row_stride + offsets, mask=mask, other=float("-inf"))
    row = row.to(tl.float32)
    shifted = row - tl.max(row, axis=0)
    e = tl.exp(shifted)
    inverse = 1.0 / tl.sum(e, axis=0)
    tl.store(out_ptr + pid * out_row_stride + offsets, e * inverse, mask=mask)


def softmax_rows(x):
    rows, cols = x.shape
    buffer = torch.empty(rows, cols, dtype=torch.float32, device=x.device)
    softmax_kernel[(rows,)](buffer, x, x.stride(0), buffer.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    return buffer.to(x.dtype)
