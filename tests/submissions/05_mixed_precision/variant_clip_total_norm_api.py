# solution: amp-clip-step
# fails:
# Correct variant: torch.nn.utils.get_total_norm and clip_grads_with_norm_ (torch 2.6+), model.zero_grad().
import torch


def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
    model.zero_grad()
    with torch.amp.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads)
    torch.nn.utils.clip_grads_with_norm_(model.parameters(), max_norm, total)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
