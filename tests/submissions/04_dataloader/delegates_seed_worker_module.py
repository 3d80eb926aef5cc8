# solution: seed-numpy-worker
# fails: worker-init-fork worker-init-spawn
# says: write it yourself
import helpers.dataloader


def seed_numpy_worker(worker_id):
    """worker_init_fn: reseed this worker's dataset.rng."""
    helpers.dataloader.seed_worker(worker_id)
