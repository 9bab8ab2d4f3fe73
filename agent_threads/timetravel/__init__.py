"""Time travel over a declared thread interface: checkpoints, snapshots, rollback, history."""
