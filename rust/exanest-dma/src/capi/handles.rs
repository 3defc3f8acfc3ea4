// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The C API's handles: a handle is not an address a program could dereference, but a slot's
//! index and generation packed into a pointer-sized value. Closing a handle gives its slot the
//! next generation, so a closed handle never finds an object again (`-EBADF`), not even the
//! one that took its slot since.

use core::ffi::c_int;
use core::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

/// Bits of a handle that hold its slot's index (plus one, so that no handle is NULL); the
/// rest hold the slot's generation.
const INDEX_BITS: u32 = 16;
/// Handles of one kind open at once.
pub(super) const MAX_OPEN: usize = (1 << INDEX_BITS) - 1;

struct Slot<T> {
    generation: usize,
    obj: Option<Box<T>>,
}

/// The slots, and those free (closed, last closed first): opening and closing take constant
/// time, however many handles are open.
struct Table<T> {
    slots: Vec<Slot<T>>,
    free: Vec<usize>,
}

/// The open handles of one kind.
pub(super) struct Handles<T> {
    table: Mutex<Table<T>>,
}

impl<T> Handles<T> {
    pub(super) const fn new() -> Self {
        Handles {
            table: Mutex::new(Table {
                slots: Vec::new(),
                free: Vec::new(),
            }),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table<T>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new handle for `obj`; `-EMFILE` when [`MAX_OPEN`] are open.
    pub(super) fn open(&self, obj: T) -> Result<usize, c_int> {
        let mut t = self.table();
        let t = &mut *t;
        let i = match t.free.pop() {
            Some(i) => i,
            None if t.slots.len() < MAX_OPEN => {
                // Reserved first: a failed allocation leaves the table as it was.
                t.free
                    .try_reserve(t.slots.len() + 1)
                    .map_err(|_| -libc::ENOMEM)?;
                t.slots.try_reserve(1).map_err(|_| -libc::ENOMEM)?;
                t.slots.push(Slot {
                    generation: 1,
                    obj: None,
                });
                t.slots.len() - 1
            }
            None => return Err(-libc::EMFILE),
        };
        let x = &mut t.slots[i];
        x.obj = Some(Box::new(obj));
        Ok((x.generation << INDEX_BITS) | (i + 1))
    }

    fn find(s: &mut [Slot<T>], h: usize) -> Result<&mut Slot<T>, c_int> {
        if h == 0 {
            return Err(-libc::EINVAL);
        }
        let i = (h & MAX_OPEN).wrapping_sub(1);
        match s.get_mut(i) {
            Some(x) if x.obj.is_some() && x.generation == h >> INDEX_BITS => Ok(x),
            _ => Err(-libc::EBADF),
        }
    }

    /// The object of handle `h`: `-EINVAL` for NULL, `-EBADF` for a value that is not an open
    /// handle of this kind. The object stays where it is until [`Handles::close`].
    pub(super) fn get(&self, h: usize) -> Result<NonNull<T>, c_int> {
        let mut t = self.table();
        let x = Self::find(&mut t.slots, h)?;
        // `obj` is `Some`: `find` checked it.
        Ok(NonNull::from(&mut **x.obj.as_mut().ok_or(-libc::EBADF)?))
    }

    /// Close handle `h`: its object, which the caller drops; `-EINVAL` or `-EBADF` as for
    /// [`Handles::get`].
    pub(super) fn close(&self, h: usize) -> Result<Box<T>, c_int> {
        let mut t = self.table();
        let t = &mut *t;
        let x = Self::find(&mut t.slots, h)?;
        x.generation = (x.generation + 1) & (usize::MAX >> INDEX_BITS);
        let obj = x.obj.take().ok_or(-libc::EBADF)?;
        // `free` has room for every slot (reserved when the slot was made).
        t.free.push((h & MAX_OPEN) - 1);
        Ok(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_handle_finds_nothing_again() {
        let t = Handles::<u32>::new();
        let a = t.open(1).unwrap();
        let b = t.open(2).unwrap();
        assert_ne!(a, 0);
        assert_ne!(a, b);
        // SAFETY: `a` is open; nothing else uses its object.
        assert_eq!(unsafe { *t.get(a).unwrap().as_ref() }, 1);
        assert_eq!(*t.close(a).unwrap(), 1);
        assert_eq!(t.get(a), Err(-libc::EBADF));
        assert_eq!(t.close(a).map(|_| ()), Err(-libc::EBADF));
        // A new handle takes the slot, with a new generation: the old one stays closed.
        let c = t.open(3).unwrap();
        assert_eq!(c & MAX_OPEN, a & MAX_OPEN, "the slot is reused");
        assert_ne!(c, a);
        assert_eq!(t.get(a), Err(-libc::EBADF));
        // SAFETY: `c` is open.
        assert_eq!(unsafe { *t.get(c).unwrap().as_ref() }, 3);
        // NULL, and values that never were handles.
        assert_eq!(t.get(0), Err(-libc::EINVAL));
        assert_eq!(t.get(b + 1), Err(-libc::EBADF));
        assert_eq!(t.get(0x7fff_0000), Err(-libc::EBADF));
        // The object does not move while its handle is open.
        let p = t.get(b).unwrap();
        for i in 0..100 {
            t.open(i).unwrap();
        }
        assert_eq!(t.get(b).unwrap(), p);
    }

    #[test]
    fn the_table_is_bounded() {
        let t = Handles::<()>::new();
        let hs: Vec<usize> = (0..MAX_OPEN).map(|_| t.open(()).unwrap()).collect();
        assert_eq!(t.open(()), Err(-libc::EMFILE));
        // One closed: its slot is the one the next open takes, and then the table is full.
        let h = hs[MAX_OPEN / 2];
        t.close(h).unwrap();
        let n = t.open(()).unwrap();
        assert_eq!(n & MAX_OPEN, h & MAX_OPEN);
        assert_eq!(t.open(()), Err(-libc::EMFILE));
    }
}
