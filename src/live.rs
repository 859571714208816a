// SPDX-License-Identifier: GPL-2.0

//! Live state published to callbacks: the one way lbr-dump hands an object it owns to code the
//! kernel calls (sysfs attributes, notifiers, CPU-hotplug and syscore callbacks).
//!
//! A [`Live`] is a static slot the callbacks read; an owner publishes an object in it for as long
//! as the object lives, and the callbacks that read it are unregistered (which waits for running
//! ones) before the object is freed. That one argument is made here, once: publishers state it
//! when they publish ([`Live::publish`], [`Published::new`]), readers when they read
//! ([`Live::get`]).

use core::ops::Deref;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::prelude::*;

/// A slot in which one object of type `T` is published to callbacks.
pub(crate) struct Live<T>(AtomicPtr<T>);

impl<T> Live<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Live(AtomicPtr::new(ptr::null_mut()))
    }

    /// Publishes `value`: the callbacks' [`Live::get`] returns it from now on.
    ///
    /// # Safety
    ///
    /// `value` stays valid until [`Live::withdraw`] has withdrawn it and, after that, until every
    /// callback that may have read it has returned: the callbacks that call [`Live::get`] on this
    /// slot are unregistered, which waits for running ones, before `value` is freed.
    pub(crate) unsafe fn publish(&self, value: &T) {
        self.0
            .store(ptr::from_ref(value).cast_mut(), Ordering::Release);
    }

    /// Withdraws `value` if it is the published object (a later publication stays).
    pub(crate) fn withdraw(&self, value: &T) {
        let me = ptr::from_ref(value).cast_mut();
        let _ = self
            .0
            .compare_exchange(me, ptr::null_mut(), Ordering::AcqRel, Ordering::Relaxed);
    }

    /// The published object, if any.
    ///
    /// # Safety
    ///
    /// Called only by a callback that its publisher unregisters before freeing the object (the
    /// contract of [`Live::publish`]), and the reference is not kept past the callback's return.
    pub(crate) unsafe fn get(&self) -> Option<&T> {
        // SAFETY: a published object is valid until the callbacks that read it are unregistered
        // (the publisher's contract), and this is such a callback (the caller's contract).
        unsafe { self.0.load(Ordering::Acquire).as_ref() }
    }
}

/// An object owned in a box and published in a [`Live`] slot until it is dropped: the slot is
/// emptied, then the object freed.
pub(crate) struct Published<T: 'static> {
    slot: &'static Live<T>,
    value: KBox<T>,
}

impl<T> Published<T> {
    /// Publishes `value` in `slot`.
    ///
    /// # Safety
    ///
    /// The callbacks that read `slot` are unregistered before this is dropped (in a struct: the
    /// guards that unregister them are fields declared before it); see [`Live::publish`].
    pub(crate) unsafe fn new(slot: &'static Live<T>, value: KBox<T>) -> Self {
        // SAFETY: the box is freed only when this is dropped, after the callbacks are gone (the
        // caller's contract); the withdrawal in `drop` precedes the free.
        unsafe { slot.publish(&value) };
        Published { slot, value }
    }
}

impl<T> Deref for Published<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> Drop for Published<T> {
    fn drop(&mut self) {
        self.slot.withdraw(&self.value);
        // `value` is freed after this, as the last field.
    }
}
