// Content Relay extension: reading a page in a background tab. One classic script that sets
// `globalThis.relayTabs`, loaded by the background (importScripts in Chromium, a background
// script in Firefox) before background.js; kept apart so that each script stays short.

(() => {
  /** Time the content script may take to read a loaded page (a busy page can stall it), ms. */
  const READ_MS = 20_000;

  /**
   * Opens `url` in a background tab, reads its article, closes the tab. A page that ended on a
   * host the reader does not open (a redirect) is not read.
   * @param {string} url An http or https address.
   * @param {number} timeoutMs Time the page may take to load, ms.
   * @param {{qaHosts: string[], allowed: string[]}} rules The reader's policy (hosts.js).
   * @returns {Promise<{ok: true, title: string, result: string} | {ok: false, reason: string}>}
   */
  async function readInTab(url, timeoutMs, rules) {
    let tab;
    try {
      tab = await chrome.tabs.create({ url, active: false });
      const late = `the page did not finish loading within ${timeoutMs / 1000} s`;
      await withTimeout(loaded(tab.id), timeoutMs, late);
      const landed = new URL((await chrome.tabs.get(tab.id)).url);
      if (!relayHosts.judgeLink(landed, rules).read) {
        const why = `it led to ${landed.host}, which the extension does not read`;
        return { ok: false, reason: `${why} (not a Q&A site, nor a host listed in its options)` };
      }
      return await withTimeout(readTab(tab.id), READ_MS, "reading the page took over 20 s");
    } catch (error) {
      // Chromium's words for a tab that shows its own error page rather than the site's.
      const reason = /error page/i.test(error.message)
        ? "the browser could not load it (no connection, or too many redirects)"
        : error.message;
      return { ok: false, reason };
    } finally {
      if (tab) await chrome.tabs.remove(tab.id).catch(() => {});
    }
  }

  /**
   * Resolves once tab `tabId` has loaded its http(s) page. Firefox reports a new tab's first
   * document, about:blank, as complete before the page starts loading: that one does not count.
   */
  function loaded(tabId) {
    return new Promise((resolve, reject) => {
      const done = (error) => {
        chrome.tabs.onUpdated.removeListener(onUpdated);
        chrome.tabs.onRemoved.removeListener(onRemoved);
        if (error) reject(error);
        else resolve();
      };
      const isLoaded = (tab) => tab.status === "complete" && /^https?:/.test(tab.url ?? "");
      const onUpdated = (id, _change, tab) => {
        if (id === tabId && isLoaded(tab)) done();
      };
      const onRemoved = (id) => {
        if (id === tabId) done(new Error("the tab was closed"));
      };
      chrome.tabs.onUpdated.addListener(onUpdated);
      chrome.tabs.onRemoved.addListener(onRemoved);
      // It may have loaded before the listener was added.
      chrome.tabs.get(tabId).then((tab) => isLoaded(tab) && done(), done);
    });
  }

  /** Runs the content script in tab `tabId` (once) and returns what it read. */
  async function readTab(tabId) {
    const target = { tabId };
    const [probe] = await chrome.scripting.executeScript({
      target,
      func: () => typeof globalThis.relayReadPage === "function",
    });
    if (!probe?.result) await chrome.scripting.executeScript({ target, files: ["content.js"] });
    const [reading] = await chrome.scripting.executeScript({
      target,
      func: () => globalThis.relayReadPage(),
    });
    if (!reading?.result) throw new Error("the page could not be read");
    return reading.result;
  }

  /** `promise`, or a rejection with `reason` after `ms`. */
  function withTimeout(promise, ms, reason) {
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(reason)), ms);
    });
    return Promise.race([promise, late]).finally(() => clearTimeout(timer));
  }

  globalThis.relayTabs = { READ_MS, readInTab, readTab, withTimeout };
})();
