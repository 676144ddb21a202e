// js-fetch: a wasi:cli/run 0.2 command built with componentize-js
// (StarlingMonkey). `js-fetch URL` GETs URL with the engine's fetch(),
// which goes out through wasi:http/outgoing-handler, and prints
// `status: N` and the body; a failure prints `error: NAME: MESSAGE` and
// exits 1 (an exception out of run() is run's error result).
import { getArguments } from 'wasi:cli/environment@0.2.12';

export const run = {
  async run() {
    const url = getArguments()[1];
    if (!url) {
      console.log('usage: js-fetch URL');
      throw new Error('usage');
    }
    try {
      const response = await fetch(url);
      console.log(`status: ${response.status}`);
      console.log(await response.text());
    } catch (e) {
      console.log(`error: ${e.name}: ${e.message}`);
      throw e;
    }
  },
};
