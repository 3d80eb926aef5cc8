# solution: amp-clip-step
# fails: amp-clip-step-unscaled
# says: divided by the scale twice
# Typical mistake: scaler.unscale_(optimizer) and a manual division by the scale on top: the gradients are 1/scale too small.
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    for p in model.parameters():
        p.grad /= scaler.get_scale()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
