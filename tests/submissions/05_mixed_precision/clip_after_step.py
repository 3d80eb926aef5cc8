# solution: amp-clip-step
# fails: amp-clip-step-clips
# says: before `scaler.step(optimizer)`
# Typical mistake: clipping after the optimizer has already stepped.
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    return loss.item()
