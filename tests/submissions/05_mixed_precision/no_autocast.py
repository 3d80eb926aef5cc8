# solution: amp-train-step
# fails: amp-train-step-autocast
# says: autocast
# Typical mistake: the scaler is used, but the forward pass runs in fp32 (no autocast at all).
def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
