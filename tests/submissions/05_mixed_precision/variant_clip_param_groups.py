# solution: amp-clip-step
# fails:
# Correct variant: clip the optimizer's parameters, zero_grad at the end, torch.amp.autocast.
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    with torch.amp.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    torch.nn.utils.clip_grad_norm_(params, max_norm=max_norm, foreach=True)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    return float(loss.item())
