# solution: amp-clip-step
# fails:
# Correct variant: max_norm as a keyword, norm_type given, gradients cleared by hand, float(loss).
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    for p in model.parameters():
        p.grad = None
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm, norm_type=2.0, error_if_nonfinite=False)
    scaler.step(optimizer)
    scaler.update()
    return float(loss)
