//! Alive: wait on something while intake is paused, the broker connection kept alive meanwhile.

use rumqttc::v5::EventLoop;

/// Awaits `wait`, polling the event loop meanwhile when `wait` is not done at once (the budget
/// is full, or Sparkplug B reads a birth from the database): queued PUBACKs go out and pings
/// keep the connection alive however long the wait, while nothing more is read (`poll_paused`,
/// vendor/rumqttc/GALEWATCH-PATCH.md). Without it a wait past the keep-alive lost the
/// connection, and the broker delivered again everything unacknowledged.
///
/// A connection lost meanwhile is left in `lost` for the loop. Then a `wait` that may be dropped
/// half done (`OnLoss::Drop`: the budget's admission) is dropped and None returned at once, so the
/// loss is handled (the gauge, the reconnect) without waiting for the database; any other
/// (`OnLoss::Finish`) is awaited to its end first.
pub(crate) async fn alive<F: std::future::Future>(
    eventloop: &mut EventLoop,
    lost: &mut Option<rumqttc::v5::ConnectionError>,
    (wait, on_loss): (F, OnLoss),
) -> Option<F::Output> {
    let mut wait = std::pin::pin!(wait);
    let now = std::future::poll_fn(|cx| std::task::Poll::Ready(wait.as_mut().poll(cx))).await;
    if let std::task::Poll::Ready(out) = now {
        return Some(out);
    }
    match eventloop.poll_paused(wait.as_mut()).await {
        Ok(out) => Some(out),
        Err(e) => {
            *lost = Some(e);
            match on_loss {
                OnLoss::Drop => None,
                OnLoss::Finish => Some(wait.await),
            }
        }
    }
}

/// Whether a wait `alive` keeps may be dropped half done when the connection is lost.
#[derive(Clone, Copy)]
pub(crate) enum OnLoss {
    /// Nothing is lost by dropping it (a semaphore's acquisition).
    Drop,
    /// It must run to its end (a format's judgement, which may be reading the database).
    Finish,
}
