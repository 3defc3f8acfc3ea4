// SPDX-License-Identifier: GPL-2.0-only

//! The C shim (`exanest_shim.c`), the only place the driver declares it, and the few raw kernel
//! bindings the driver calls directly, each behind a wrapper that states its contract.
//!
//! The declarations are not written by hand: `make module` runs bindgen on `exanest_shim.h` and
//! this file includes the result, so a Rust call whose types differ from the header does not
//! compile, and the shim's C definitions are compiled against that same header. The two
//! functions the shim calls back into Rust are checked against the header too
//! ([`check_callback!`]).

use crate::exanest_core::batch::{Want, BATCH_SPAN};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use kernel::{bindings, device, prelude::*, sync::aref::ARef};

/// The bindgen output for `exanest_shim.h`. Struct types come from `kernel::bindings`.
#[allow(
    dead_code,
    non_camel_case_types,
    non_upper_case_globals,
    missing_docs,
    unreachable_pub,
    improper_ctypes,
    clippy::all,
    clippy::pedantic
)]
pub(crate) mod raw {
    #[allow(unused_imports)]
    use kernel::bindings::*;
    include!(env!("EXANEST_SHIM_BINDINGS"));
}

/// Fails to compile unless the Rust function `$def` has the signature the shim header declares
/// for `$decl` (both coerce to one function pointer type only if they agree).
macro_rules! check_callback {
    ($decl:path, $def:path) => {
        const _: () = {
            let _same = if true { $decl } else { $def };
        };
    };
}
pub(crate) use check_callback;

/// `EPOLLIN | EPOLLRDNORM`, from the kernel's headers (through the shim).
pub(crate) fn poll_readable() -> u32 {
    // SAFETY: A `const` object defined in the shim, initialised at compile time.
    unsafe { raw::exanest_shim_pollin }
}

/// `EPOLLERR | EPOLLHUP`, from the kernel's headers (through the shim).
pub(crate) fn poll_hangup() -> u32 {
    // SAFETY: A `const` object defined in the shim, initialised at compile time.
    unsafe { raw::exanest_shim_pollhup }
}

/// The fault path's stamp clock in nanoseconds: the architected counter that the monotonic
/// clock reads, scaled, without the timekeeper around it (its own origin: only differences
/// between its readings mean anything); callable in any context, hard IRQ included.
/// Read inline when the shim allows it (`exanest_shim_stamp_setup`): 9 instructions a stamp
/// instead of a call's 37, and a fault takes seven.
#[inline]
pub(crate) fn stamp_ns() -> u64 {
    let scale = match STAMP.load(Ordering::Relaxed) {
        0 => stamp_setup(),
        s => s,
    };
    #[cfg(target_arch = "aarch64")]
    if scale & u64::from(raw::EXANEST_STAMP_DIRECT) != 0 {
        let cnt: u64;
        // The shim found that no CPU needs an erratum's workaround to read CNTVCT_EL0 and that
        // it is the counter the kernel's clock reads (`EXANEST_STAMP_DIRECT`).
        // SAFETY: ISB then MRS of CNTVCT_EL0 touch no memory, per the shim's check above.
        unsafe { core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) cnt, options(nostack)) };
        // `mul_u64_u32_shr`: the scale is `mult << 32 | shift` (shift < 64) and the flag.
        let ns = (u128::from(cnt) * u128::from(scale >> 32)) >> (scale & 0x3f);
        return ns as u64;
    }
    // SAFETY: The shim's stamp has no preconditions and may be called from any context.
    unsafe { raw::exanest_shim_stamp_ns() }
}

/// The stamps' scale and whether they may read the counter inline, from the shim at the
/// first stamp (any context: it only computes and reads the counter).
static STAMP: AtomicU64 = AtomicU64::new(0);

#[cold]
fn stamp_setup() -> u64 {
    // SAFETY: No preconditions; callable from any context (it computes a scale and reads the
    // counter three times).
    let s = unsafe { raw::exanest_shim_stamp_setup() };
    STAMP.store(s, Ordering::Relaxed);
    s
}

/// A mark for `make profile`'s instruction profiler (tests/qemu-model/insprof.c), which counts
/// the instructions of a fault's critical path apart: from [`Mark::Begin`] (the interrupt
/// thread starts, or its poll sees a fault) to [`Mark::End`] (the fault's answer is written) or
/// [`Mark::Drop`] (the thread returns), what every CPU executes meanwhile (the virtual clock's
/// time under -icount). Each is one `HINT` instruction of the unallocated hint space (#101 to
/// #103), which the architecture executes as a NOP.
#[derive(Clone, Copy)]
pub(crate) enum Mark {
    Begin,
    End,
    Drop,
}

/// Execute the profiler's mark `m` (a NOP: [`Mark`]).
#[inline(always)]
pub(crate) fn prof_mark(m: Mark) {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `HINT #101` to `#103` are NOPs (unallocated hints): they touch no register,
    // memory or flag.
    unsafe {
        match m {
            Mark::Begin => core::arch::asm!("hint #101", options(nomem, nostack, preserves_flags)),
            Mark::End => core::arch::asm!("hint #102", options(nomem, nostack, preserves_flags)),
            Mark::Drop => core::arch::asm!("hint #103", options(nomem, nostack, preserves_flags)),
        }
    }
    // No mark elsewhere: the profiler runs arm64 guests.
    #[cfg(not(target_arch = "aarch64"))]
    let _ = m;
}

/// The monotonic clock in nanoseconds; callable in any context, hard IRQ included.
pub(crate) fn ktime_ns() -> u64 {
    // SAFETY: `ktime_get()` has no preconditions and may be called from any context.
    u64::try_from(unsafe { bindings::ktime_get() }).unwrap_or(0)
}

/// The raw `struct device` of a device.
pub(crate) fn raw_dev(dev: &device::Device) -> *mut bindings::device {
    // `device::Device` is `#[repr(transparent)]` over `Opaque<bindings::device>`, which is itself
    // transparent, so the pointer to one is the pointer to the other (`as_raw` is crate-private).
    core::ptr::from_ref(dev).cast_mut().cast()
}

/// Allocate an IOMMU paging domain suited to `dev` (`iommu_paging_domain_alloc`).
pub(crate) fn domain_alloc(dev: &device::Device) -> Result<NonNull<bindings::iommu_domain>> {
    // SAFETY: `raw_dev` is a valid device, referenced by `dev` for the whole call.
    let raw = kernel::error::from_err_ptr(unsafe { raw::exanest_shim_domain_alloc(raw_dev(dev)) })?;
    NonNull::new(raw).ok_or(ENOMEM)
}

/// Whether the IOMMU of `dev` stops recording the faults of a paging domain attached to it
/// when asked (`iommu_set_fault_events`, this project's kernel patch 6).
pub(crate) fn no_fault_events_capable(dev: &device::Device) -> bool {
    // SAFETY: `raw_dev` is a valid device, referenced by `dev` for the whole call.
    unsafe {
        bindings::device_iommu_capable(raw_dev(dev), bindings::iommu_cap_IOMMU_CAP_NO_FAULT_EVENTS)
    }
}

/// The physical address of a page.
///
/// # Safety
///
/// `page` points to a live `struct page` (the caller holds a pin or a reference on it).
pub(crate) unsafe fn page_to_phys(page: NonNull<bindings::page>) -> u64 {
    // SAFETY: Per the contract, `page` is a live page.
    unsafe { raw::exanest_shim_page_to_phys(page.as_ptr()) }
}

/// One HMM pfn entry: empty ([`Default`]) until [`MniPtr::hmm_fault`] fills it.
///
/// # Invariants
///
/// Every value that [`HmmPfn::phys`] is called on came from a successful `hmm_range_fault`
/// that requested its page, which leaves it present (a sparse request's other entries are never
/// used: `Faulted::requested`), or from [`HmmPfn::for_test`] (KUnit), whose
/// address is only computed, never used to reach memory.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub(crate) struct HmmPfn(usize);

impl HmmPfn {
    /// An empty entry (no page, nothing requested).
    pub(crate) const ZERO: Self = HmmPfn(0);

    /// Whether the CPU maps the page writable.
    pub(crate) fn writable(self) -> bool {
        // SAFETY: A `const` object defined in the shim, initialised at compile time.
        self.0 & unsafe { raw::exanest_shim_hmm_pfn_write } != 0
    }

    /// Order of the CPU mapping (9 for a PMD-mapped transparent huge page, 4 KiB pages).
    pub(crate) fn order(self) -> u32 {
        // SAFETY: A pure bit extraction on the value, valid for any value.
        unsafe { raw::exanest_shim_hmm_pfn_order(self.0) }
    }

    /// KUnit: the pfn HMM returns for a present page `pfn`, writable or not, mapped by the CPU
    /// with `order`.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn for_test(pfn: usize, write: bool, order: u32) -> Self {
        // INVARIANT: KUnit only, with page tables that never reach memory.
        // SAFETY: Pure arithmetic on the values.
        HmmPfn(unsafe { raw::exanest_shim_hmm_pfn_make(pfn, write, order) })
    }

    /// The physical address of the page.
    ///
    /// # Safety
    ///
    /// The notifier sequence the pfns were returned with has not moved since (checked under
    /// the lock that the invalidation callback takes), so the page is still the one mapped.
    pub(crate) unsafe fn phys(self) -> u64 {
        // By the type invariant the pfn names a present page; per the contract it is still
        // mapped, hence alive: its address is the pfn's (`hmm_pfn_to_phys()`).
        // SAFETY: A `const` object defined in the shim, initialised at compile time.
        let pfn = self.0 & !unsafe { raw::exanest_shim_hmm_pfn_flags };
        (pfn as u64) << kernel::page::PAGE_SHIFT
    }
}

/// An interval notifier allocated by the shim (`struct exanest_mni`), watching part of an mm.
///
/// # Invariants
///
/// `0` points to a live, inserted `mmu_interval_notifier` from `exanest_shim_notifier_insert`;
/// it is removed and freed exactly once, when the `MniPtr` is dropped. The type is neither
/// `Copy` nor `Clone`.
pub(crate) struct MniPtr(NonNull<bindings::mmu_interval_notifier>);

// SAFETY: The notifier is a C object usable from any thread; its removal takes `self` by value.
unsafe impl Send for MniPtr {}
// SAFETY: Shared references only read the sequence (`read_retry`) or pass the pointer to
// `hmm_range_fault`, both of which the mm core allows concurrently.
unsafe impl Sync for MniPtr {}

impl MniPtr {
    /// Watch `[start, start + length)` of `mm`; invalidations call
    /// `exanest_rust_invalidate(token, ...)`.
    ///
    /// # Safety
    ///
    /// `mm` is a live mm with a user (`mmget`) or the current process's; `token` stays valid
    /// for the callback until the notifier is removed.
    pub(crate) unsafe fn insert(
        mm: *mut bindings::mm_struct,
        start: u64,
        length: u64,
        token: *const core::ffi::c_void,
    ) -> Result<Self> {
        let mut err = 0;
        // SAFETY: Per the contract; `err` is a valid out pointer.
        let mni = unsafe {
            raw::exanest_shim_notifier_insert(
                mm,
                start as usize,
                length as usize,
                token.cast_mut(),
                &mut err,
            )
        };
        // INVARIANT: A non-NULL return is an inserted notifier.
        NonNull::new(mni)
            .map(MniPtr)
            .ok_or_else(|| Error::from_errno(err))
    }

    /// Fault `[start, end)` in for device access (read, or write too): one pfn per page into
    /// `pfns`, and the notifier sequence to check with [`MniPtr::read_retry`] before using them.
    /// Only the pages `want` asks for are faulted in, and only their pfns may be used. With
    /// `locked` None it takes the mmap lock itself and may sleep. With `locked`, the VMA of the
    /// range, borrowed from the mmap read lock's guard (held throughout, and kept), it does not
    /// sleep on the mm and fails with EAGAIN where it would (the shim's
    /// `exanest_hmm_fault_locked`: a fault that would wait, or a range not in that VMA,
    /// anonymous, with the access).
    pub(crate) fn hmm_fault(
        &self,
        locked: Option<&kernel::mm::virt::VmaRef>,
        start: u64,
        end: u64,
        write: bool,
        want: &Want,
        pfns: &mut [HmmPfn],
    ) -> Result<usize> {
        let n = (end.saturating_sub(start)) >> kernel::page::PAGE_SHIFT;
        if start >= end || pfns.len() as u64 != n {
            return Err(EINVAL);
        }
        let (run, stride, mask) = match want {
            Want::All => (0, 0, core::ptr::null()),
            Want::Strided { run, stride } if *run > 0 && stride >= run => {
                (*run, *stride, core::ptr::null())
            }
            // The shim reads a bit per page of the range, from `unsigned long` words.
            Want::Mask(m) if n <= BATCH_SPAN => {
                const _: () = assert!(size_of::<core::ffi::c_ulong>() == size_of::<u64>());
                (0, 0, m.words().as_ptr())
            }
            _ => return Err(EINVAL),
        };
        // A non-null `vma` is borrowed from a guard of its mm's mmap read lock, held for the
        // call; the shim checks that the VMA's mm is the notifier's, and keeps the lock held.
        let vma = locked.map_or(core::ptr::null_mut(), |v| v.as_ptr());
        let mut seq = 0usize;
        // SAFETY: Live notifier (type invariant); `pfns` has an entry per page (`HmmPfn` is a
        // transparent `usize`), `mask` a bit per page in 64-bit words, `vma` null or under its
        // mm's mmap read lock, held by the caller (the shim checks it is the notifier's mm).
        let ret = unsafe {
            raw::exanest_shim_hmm_fault(
                self.0.as_ptr(),
                vma,
                start as usize,
                end as usize,
                write,
                run as usize,
                stride as usize,
                mask.cast(),
                pfns.as_mut_ptr().cast(),
                &mut seq,
            )
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: `hmm_range_fault` succeeded: every requested entry names a present page.
        Ok(seq)
    }

    /// Whether an invalidation ran since `seq` was read.
    pub(crate) fn read_retry(&self, seq: usize) -> bool {
        // SAFETY: The notifier is live (type invariant).
        unsafe { raw::exanest_shim_read_retry(self.0.as_ptr(), seq) }
    }
}

impl Drop for MniPtr {
    /// Stop watching and free; waits for invalidation callbacks in progress, so it must not
    /// run under a lock those callbacks take.
    fn drop(&mut self) {
        // SAFETY: By the type invariant the notifier is live, and this is its only removal.
        unsafe { raw::exanest_shim_notifier_remove(self.0.as_ptr()) }
    }
}

/// Record the invalidation sequence, from the invalidate callback.
///
/// # Safety
///
/// `mni` is the notifier the callback was called for, and the caller holds the lock that
/// orders the callback against [`MniPtr::read_retry`] users.
pub(crate) unsafe fn set_seq(mni: *mut bindings::mmu_interval_notifier, cur_seq: usize) {
    // SAFETY: Per the contract.
    unsafe { raw::exanest_shim_set_seq(mni, cur_seq) }
}

/// KUnit: run `f(arg)` in hard-IRQ context (an irq_work on this CPU), wait for it, and report
/// whether it really ran in hard-IRQ context.
///
/// # Safety
///
/// `arg` is valid for `f` until this returns.
#[cfg(CONFIG_KUNIT)]
pub(crate) unsafe fn call_in_hardirq(
    f: unsafe extern "C" fn(*mut core::ffi::c_void),
    arg: *mut core::ffi::c_void,
) -> bool {
    // SAFETY: Per the contract; the shim waits for the irq_work before returning.
    unsafe { raw::exanest_shim_call_in_hardirq(Some(f), arg) }
}

/// The work a [`FaultThread`] runs after each kick, with the token it was started with.
pub(crate) type ThreadWork = unsafe fn(*mut core::ffi::c_void);

/// What the fault thread and its owner share; boxed, so its address stays put for the thread.
struct ThreadState {
    token: *mut core::ffi::c_void,
    work: ThreadWork,
    /// Set by a kick, taken by the thread before it runs the work.
    kicked: AtomicBool,
    /// Set by [`FaultThread::stop`]: the thread runs no more work.
    stopping: AtomicBool,
}

/// A process's fault thread `exanest-fault/<id>`: runs its work after each
/// [`FaultThread::kick`]. A kernel thread rather than a work item because fault-in may sleep
/// for as long as user space wants (userfaultfd, FUSE), and only a thread can be told to give
/// up: it accepts SIGKILL, which ends killable waits in the fault path (mmap lock,
/// `handle_userfault`, GUP) with EINTR. [`FaultThread::stop`] sends it and waits for the
/// thread to exit.
///
/// # Invariants
///
/// `task` is a started kernel thread running [`thread_fn`] on `state`, referenced (so the
/// task struct stays for `kthread_stop`); `state` is freed only after the thread has exited
/// (`Drop` stops it first).
pub(crate) struct FaultThread {
    task: NonNull<bindings::task_struct>,
    state: KBox<ThreadState>,
    stopped: AtomicBool,
}

// SAFETY: The task may be woken, signalled and stopped from any thread; the shared state is
// atomics and the token, which the owner guarantees is usable from the thread.
unsafe impl Send for FaultThread {}
// SAFETY: As above: `kick` and `stop` may run concurrently (an atomic and a wake-up; an atomic
// swap makes only one `stop` signal and stop the task).
unsafe impl Sync for FaultThread {}

/// The fault thread's loop: sleep until kicked or stopped; run the work after each kick.
///
/// # Safety
///
/// `data` is the [`ThreadState`] of the [`FaultThread`] that started the thread, which lives
/// until the thread has exited.
unsafe extern "C" fn thread_fn(data: *mut core::ffi::c_void) -> kernel::ffi::c_int {
    // SAFETY: Per the contract.
    let st = unsafe { &*data.cast::<ThreadState>() };
    // SAFETY: Called on the current (new) kernel thread.
    unsafe { raw::exanest_shim_allow_sigkill() };
    loop {
        // The state is set before the flags are looked at, so a kick or a stop after the look
        // wakes the sleep below (set_current_state is a full barrier; so is the wake-up).
        // SAFETY: On the current thread.
        unsafe { raw::exanest_shim_set_state_interruptible() };
        // SAFETY: Called from a kernel thread started by `kthread_create_on_node`.
        if st.stopping.load(Ordering::SeqCst) || unsafe { bindings::kthread_should_stop() } {
            // SAFETY: On the current thread.
            unsafe { raw::exanest_shim_set_state_running() };
            break;
        }
        if !st.kicked.swap(false, Ordering::SeqCst) {
            // SAFETY: A kernel thread may sleep here; no lock is held.
            unsafe { bindings::schedule() };
            continue;
        }
        // SAFETY: On the current thread.
        unsafe { raw::exanest_shim_set_state_running() };
        // SAFETY: The owner started the thread with a work and token that stay valid until the
        // thread is stopped, which is not yet (`stopping` was clear).
        unsafe { (st.work)(st.token) };
    }
    // kthread_stop() may not have been called yet: wait for it, it always comes.
    // SAFETY: As above, in a kernel thread.
    while !unsafe { bindings::kthread_should_stop() } {
        // SAFETY: On the current thread.
        unsafe { raw::exanest_shim_set_state_interruptible() };
        // SAFETY: As above.
        if !unsafe { bindings::kthread_should_stop() } {
            // SAFETY: As above.
            unsafe { bindings::schedule() };
        }
        // SAFETY: On the current thread.
        unsafe { raw::exanest_shim_set_state_running() };
    }
    0
}

impl FaultThread {
    /// Start the thread `exanest-fault/<id>`, asleep until kicked, to run `work(token)`.
    ///
    /// # Safety
    ///
    /// `work(token)` may be called on the thread after each kick until [`FaultThread::stop`]
    /// returned or the thread is dropped.
    pub(crate) unsafe fn start(
        token: *mut core::ffi::c_void,
        work: ThreadWork,
        id: i32,
    ) -> Result<Self> {
        let state = KBox::new(
            ThreadState {
                token,
                work,
                kicked: AtomicBool::new(false),
                stopping: AtomicBool::new(false),
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        let data = core::ptr::from_ref::<ThreadState>(&state).cast_mut().cast();
        // SAFETY: `thread_fn` gets `data`, a `ThreadState` that lives until the thread exits
        // (the new value's invariant); the name format takes one int.
        let task = unsafe {
            bindings::kthread_create_on_node(
                Some(thread_fn),
                data,
                bindings::NUMA_NO_NODE,
                kernel::str::CStrExt::as_char_ptr(c"exanest-fault/%d"),
                id,
            )
        };
        let task = kernel::error::from_err_ptr(task)?;
        let task = NonNull::new(task).ok_or(ENOMEM)?;
        // SAFETY: `task` is the new, live thread; the reference is dropped in `Drop`.
        unsafe { bindings::get_task_struct(task.as_ptr()) };
        // SAFETY: As above; it starts in `thread_fn` and sleeps until kicked.
        unsafe { bindings::wake_up_process(task.as_ptr()) };
        // INVARIANT: `task` runs `thread_fn` on `state`, referenced above.
        Ok(FaultThread {
            task,
            state,
            stopped: AtomicBool::new(false),
        })
    }

    /// Wake the thread to run the work; any context, hard IRQ included. After
    /// [`FaultThread::stop`] it does nothing.
    pub(crate) fn kick(&self) {
        self.state.kicked.store(true, Ordering::SeqCst);
        // SAFETY: `task` is referenced (type invariant); waking an exited task is harmless.
        unsafe { bindings::wake_up_process(self.task.as_ptr()) };
    }

    /// Make the work give up (its killable sleeps end with EINTR) and wait for the thread to
    /// exit. Idempotent. Must not be called from the thread, nor with a lock the work takes.
    pub(crate) fn stop(&self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        self.state.stopping.store(true, Ordering::SeqCst);
        // SAFETY: `task` is referenced (type invariant). The signal makes a killable sleep in
        // the work end; `kthread_stop` wakes the thread and waits for `thread_fn` to return,
        // once only (`stopped`).
        unsafe {
            bindings::send_sig(bindings::SIGKILL as i32, self.task.as_ptr(), 1);
            bindings::kthread_stop(self.task.as_ptr());
        }
    }
}

impl Drop for FaultThread {
    fn drop(&mut self) {
        self.stop();
        // SAFETY: The reference taken in `start`; the thread has exited, so nothing uses
        // `state` any more when it is freed after this.
        unsafe { bindings::put_task_struct(self.task.as_ptr()) };
    }
}

/// A process's address space as its fault path looks VMAs up: with the VMA found last, reused
/// while no writer has held the mmap lock since and it holds the address (the shim's
/// `exanest_shim_vma_lookup`: a fault's maple tree walk, 117 instructions, saved). The hint
/// belongs to this mm alone, which the type keeps it with; otherwise the mm as
/// [`kernel::mm::Mm`] (through `Deref`).
pub(crate) struct FaultMm {
    mm: ARef<kernel::mm::Mm>,
    /// The VMA found last (null: none yet), valid while the mm's mmap lock sequence is `seq`.
    hint: AtomicPtr<bindings::vm_area_struct>,
    seq: AtomicU32,
}

impl FaultMm {
    pub(crate) fn new(mm: ARef<kernel::mm::Mm>) -> Self {
        FaultMm {
            mm,
            hint: AtomicPtr::new(core::ptr::null_mut()),
            seq: AtomicU32::new(0),
        }
    }

    /// Run `f` with the VMA at `addr` (EFAULT if none), under the mmap read lock taken without
    /// waiting (WOULD_BLOCK if contended; EFAULT if the mm has no users left), held while `f`
    /// runs.
    pub(crate) fn try_with_vma<T>(
        &self,
        addr: u64,
        f: impl FnOnce(&kernel::mm::virt::VmaRef) -> Result<T>,
    ) -> Result<T> {
        let user = self.mm.mmget_not_zero().ok_or(EFAULT)?;
        let guard = user.mmap_read_trylock().ok_or(crate::fault::WOULD_BLOCK)?;
        // SAFETY: `guard` holds the mmap read lock of `user`, which is `self.mm`, for the call;
        // `hint` and `seq` are this mm's (the type's invariant) and only the shim accesses them.
        let vma = unsafe {
            raw::exanest_shim_vma_lookup(
                self.mm.as_raw(),
                addr as usize,
                self.hint.as_ptr(),
                self.seq.as_ptr(),
            )
        };
        if vma.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: A VMA of the mm found under its mmap read lock, which `guard` holds until `f`
        // returns (`f` cannot keep the reference: `T` does not borrow it).
        let r = f(unsafe { kernel::mm::virt::VmaRef::from_raw(vma) });
        drop(guard);
        r
    }
}

impl core::ops::Deref for FaultMm {
    type Target = ARef<kernel::mm::Mm>;

    fn deref(&self) -> &Self::Target {
        &self.mm
    }
}

/// Charge `__GFP_ACCOUNT` allocations of the current thread to the memory cgroup of `mm`'s
/// owner while the value lives (for the fault thread, which works for a process).
pub(crate) struct MemcgScope {
    old: *mut core::ffi::c_void,
    active: bool,
}

impl MemcgScope {
    pub(crate) fn enter(mm: &kernel::mm::Mm) -> Self {
        let mut old = core::ptr::null_mut();
        // SAFETY: `mm` is a live mm (the reference keeps it); `old` is a valid out pointer.
        let active = unsafe { raw::exanest_shim_memcg_enter(mm.as_raw(), &mut old) };
        MemcgScope { old, active }
    }
}

impl Drop for MemcgScope {
    fn drop(&mut self) {
        if self.active {
            // SAFETY: `old` is what `enter` returned on this thread; the scope is not `Send`
            // (it holds a raw pointer), so this runs on the thread that entered it.
            unsafe { raw::exanest_shim_memcg_exit(self.old) }
        }
    }
}

/// Set up `vma` as a doorbell: uncached device memory, `VM_PFNMAP`, mapped page by page by
/// `ops`' fault (device.rs, which calls the process's `doorbell_fault`, userq.rs).
pub(crate) fn map_doorbell(
    vma: &kernel::mm::virt::VmaNew,
    ops: &'static bindings::vm_operations_struct,
) {
    // SAFETY: `vma` is the VMA being set up by this mmap call (the mmap lock is held for write
    // by the caller of `f_op->mmap`); `ops` lives for ever and its fault expects this file.
    unsafe { raw::exanest_shim_map_doorbell(vma.as_ptr(), ops) };
}

/// Map the doorbell page at `phys` where `vmf` faulted. ENOMEM, or EFAULT if the page cannot
/// be mapped (or `phys` is not a page's address).
///
/// # Safety
///
/// `vmf` is the fault being handled (its lock held), in a VMA set up by [`map_doorbell`], and
/// `phys` the doorbell page of a context the VMA's process holds while the mapping stays.
pub(crate) unsafe fn insert_doorbell(vmf: *mut bindings::vm_fault, phys: u64) -> Result {
    if phys % kernel::page::PAGE_SIZE as u64 != 0 {
        return Err(EFAULT);
    }
    let pfn = (phys >> kernel::page::PAGE_SHIFT) as usize;
    // SAFETY: Per the contract.
    match unsafe { raw::exanest_shim_insert_pfn(vmf, pfn) } {
        bindings::vm_fault_reason_VM_FAULT_NOPAGE => Ok(()),
        bindings::vm_fault_reason_VM_FAULT_OOM => Err(ENOMEM),
        _ => Err(EFAULT),
    }
}

/// Turn on memory decoding of a VF (its BAR: the context's doorbell page).
///
/// # Safety
///
/// `vf` is a live PCI device (referenced), with no driver of its own.
pub(crate) unsafe fn vf_memory_on(vf: *mut bindings::pci_dev) {
    // SAFETY: Per the contract.
    unsafe { raw::exanest_shim_vf_memory_on(vf) }
}

/// Virtual function `id` of `pf`, with a reference taken (the caller drops it), or null: none
/// with that index, or (its routing ID past the PF's bus) not found there.
///
/// # Safety
///
/// `pf` is a live PCI physical function with SR-IOV enabled.
pub(crate) unsafe fn pci_get_vf(pf: *mut bindings::pci_dev, id: i32) -> *mut bindings::pci_dev {
    // SAFETY: Per the contract.
    unsafe { raw::exanest_shim_pci_get_vf(pf, id) }
}

/// Context `n` of the engine `parent` on the devicetree front-end: its platform device, made
/// from `parent`'s child node for it and taken for DMA ownership by `owner` (exanest_shim.c).
/// `Ok(None)` when `parent` has no such node.
///
/// # Safety
///
/// `parent` is a bound platform device (its probe runs); `owner` stays valid until
/// [`of_context_destroy`] is called with it.
pub(crate) unsafe fn of_context_create(
    parent: &device::Device,
    n: u32,
    owner: *mut core::ffi::c_void,
) -> Result<Option<NonNull<bindings::device>>> {
    // SAFETY: Per the contract; `raw_dev` is a valid device for the whole call.
    let d = unsafe { raw::exanest_shim_of_context_create(raw_dev(parent), n, owner) };
    Ok(NonNull::new(kernel::error::from_err_ptr(d)?))
}

/// Destroy a context's device made by [`of_context_create`], giving up its reference.
///
/// # Safety
///
/// `dev` and `owner` are what a call of [`of_context_create`] returned and was given, and
/// `dev` is not used afterwards.
pub(crate) unsafe fn of_context_destroy(
    dev: NonNull<bindings::device>,
    owner: *mut core::ffi::c_void,
) {
    // SAFETY: Per the contract.
    unsafe { raw::exanest_shim_of_context_destroy(dev.as_ptr(), owner) }
}

/// The address space of the file `vma` maps (null for an anonymous VMA).
pub(crate) fn vma_mapping(vma: &kernel::mm::virt::VmaNew) -> *mut bindings::address_space {
    // SAFETY: `vma` is the VMA of the current mmap call, alive under the mmap lock; its
    // `vm_file` (if any) holds a reference to the file and so to its inode's mapping.
    unsafe { raw::exanest_shim_vma_mapping(vma.as_ptr()) }
}

/// Zap every mapping of the page at byte `offset` of `mapping`.
///
/// # Safety
///
/// `mapping` is the live address space of an open file (the caller holds the file open).
pub(crate) unsafe fn zap(mapping: *mut bindings::address_space, offset: u64) {
    // SAFETY: Per the contract.
    unsafe { raw::exanest_shim_zap(mapping, offset) }
}

#[kunit_tests(exanest_dma_ffi)]
mod tests {
    use super::*;

    /// The shim's stamp, read through its call (the way that needs no check of the counter).
    fn shim_stamp() -> u64 {
        // SAFETY: No preconditions; callable from any context.
        unsafe { raw::exanest_shim_stamp_ns() }
    }

    /// A stamp read inline (when the shim allows it) is the shim's clock and scale: between two
    /// of the shim's stamps, in order, every time; and it moves.
    #[test]
    fn stamps_read_inline_are_the_shims_clock() {
        for _ in 0..1000 {
            let (a, b, c) = (shim_stamp(), stamp_ns(), shim_stamp());
            assert!(a <= b && b <= c);
        }
        let (first, mut last) = (stamp_ns(), 0);
        for _ in 0..10_000 {
            last = stamp_ns();
        }
        assert!(last > first);
    }
}
