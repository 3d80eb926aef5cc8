# solution: train-ddp
# fails:
# says:
def train_ddp(rank, world_size, x, y, checkpoint, epochs=2, batch_size=4, lr=0.05, seed=0):
    """DistributedSampler's own recipe written out (seed + epoch, padding, every world_size-th index), env:// init,
    a CPU copy saved and loaded without a DataLoader."""
    ### BEGIN SOLUTION
    import math

    dist.init_process_group("gloo")  # RANK and WORLD_SIZE come from the environment
    torch.manual_seed(seed)
    model = MLP(x.shape[1], 16, y.shape[1], depth=1).to("cpu")
    net = DDP(model)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    total = math.ceil(len(x) / world_size) * world_size
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        order += order[: total - len(order)]
        mine = order[rank:total:world_size]
        for start in range(0, len(mine), batch_size):
            idx = mine[start:start + batch_size]
            opt.zero_grad()
            nn.functional.mse_loss(net(x[idx]), y[idx]).backward()
            opt.step()
    if dist.get_rank() == 0:
        torch.save({k: v.cpu() for k, v in net.module.state_dict().items()}, checkpoint)
    dist.barrier()
    loaded = torch.load(checkpoint, map_location="cpu", weights_only=True)
    dist.destroy_process_group()
    return loaded
    ### END SOLUTION
