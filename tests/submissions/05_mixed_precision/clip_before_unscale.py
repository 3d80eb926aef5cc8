# solution: amp-clip-step
# fails: amp-clip-step-unscaled
# says: unscale_
# Typical mistake: unscale_ is called, but after clipping (the clipping still saw scaled gradients).
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
