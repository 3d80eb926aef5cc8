# solution: amp-clip-step
# fails: amp-clip-step-scaler
# says: error_if_nonfinite
# Typical mistake: clip_grad_norm_(..., error_if_nonfinite=True): an inf gradient crashes the step instead of skipping it.
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, error_if_nonfinite=True)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
