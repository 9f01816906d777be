/**
 * The relay's source of time, injected wherever time matters so that tests can
 * move it by hand instead of sleeping or faking timers.
 *
 * @module
 */

/** Returns the current time as integer epoch milliseconds. */
export type Clock = () => number;

/** The real clock: `Date.now()`, integer epoch milliseconds. */
export const systemClock: Clock = () => Date.now();
