# solution: amp-clip-step
# fails: amp-clip-step-amp
# says: backward ran more than once
# Typical mistake: loss.backward() and then scaler.scale(loss).backward() in the clipping step.
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    loss.backward(retain_graph=True)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
