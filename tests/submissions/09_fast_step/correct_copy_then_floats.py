# solution: fast-step
# fails: 
# says: 
# Correct, written differently: the losses copied to the host once after the loop (.to("cpu")), then read one by
# one there, which waits for nothing.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    losses_cpu = torch.stack(losses).to("cpu")
    return [float(l) for l in losses_cpu]
