//! The seam for spreading one request's independent work over threads:
//! XTS data units do not depend on each other, so a request of many blocks
//! can be split across the keystream engine's workers, the calling thread
//! doing a share instead of waiting (as TrueCrypt spreads data units over
//! its cores).

/// Runs the parts of one request on several threads.
pub trait Splitter: Send + Sync {
    /// Run `f(i)` for every `i` in `0..parts`, each exactly once, on the
    /// calling thread and on any idle worker; returns when all are done.
    /// A panic in a part is resumed on the caller.
    fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync));

    /// Threads that may take parts besides the caller (0: the caller does
    /// everything).
    fn helpers(&self) -> usize;
}

/// Runs every part on the calling thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct Inline;

impl Splitter for Inline {
    fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        (0..parts).for_each(f)
    }

    fn helpers(&self) -> usize {
        0
    }
}
