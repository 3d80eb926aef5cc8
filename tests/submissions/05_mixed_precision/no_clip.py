# solution: amp-clip-step
# fails: amp-clip-step-clips
# says: clip_grad_norm_
# Typical mistake: unscale_ is called but the clipping itself is forgotten.
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
