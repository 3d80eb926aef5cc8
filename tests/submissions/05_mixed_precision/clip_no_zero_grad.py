# solution: amp-clip-step
# fails: amp-clip-step-amp
# says: zero_grad
# Typical mistake: the clipping step never clears the gradients (hidden at a large scale: unscale_ shrinks the leftovers).
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
