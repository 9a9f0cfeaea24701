// One Node agent process: races the Python agent for every round's effect key.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { Warden, withContext, Duplicate } = require(process.env.WARDEN_NODE_PACKAGE);

async function main() {
  const [store, config, work, roundsText] = process.argv.slice(2);
  const rounds = Number(roundsText);
  const w = new Warden({ store, config });
  const run = w.protect('race.run', async (args) => {
    // The remote call: creating the marker twice would mean the effect ran twice.
    fs.writeFileSync(path.join(work, 'calls', String(args.round)), 'node', { flag: 'wx' });
    return { by: 'node', round: args.round };
  });
  fs.writeFileSync(path.join(work, 'ready.node'), '');
  while (!fs.existsSync(path.join(work, 'go'))) {
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  let won = 0;
  await withContext({ agent: 'node-agent', user: 'bob' }, async () => {
    for (let round = 0; round < rounds; round++) {
      try {
        await run({ round });
        won += 1;
      } catch (error) {
        if (!(error instanceof Duplicate)) throw error;
      }
    }
  });
  w.close();
  console.log(`node won ${won}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
