// Drives wbsync's queues from Node BullMQ: run by tests/jobs/test_node_interop.py with one JSON argument
// {redisUrl, prefix, queue, deferredJobId, jobs: [{id, data, attempts}]}; prints one JSON line.
const { Queue } = require("bullmq");

async function main() {
  const args = JSON.parse(process.argv[2]);
  const url = new URL(args.redisUrl);
  const connection = {
    host: url.hostname,
    port: Number(url.port || 6379),
    db: Number((url.pathname || "/0").slice(1) || 0),
  };
  const queue = new Queue(args.queue, { connection, prefix: args.prefix });
  try {
    const workers = await queue.getWorkersCount();
    const deferred = await queue.getJob(args.deferredJobId);
    const deferredState = await deferred.getState();
    for (const job of args.jobs) {
      await queue.add(args.queueName, job.data, { jobId: job.id, attempts: job.attempts });
    }
    const finished = {};
    const deadline = Date.now() + 30000;
    while (Object.keys(finished).length < args.jobs.length && Date.now() < deadline) {
      for (const job of args.jobs) {
        if (finished[job.id]) continue;
        const state = await queue.getJobState(job.id);
        if (state === "completed" || state === "failed") {
          const stored = await queue.getJob(job.id); // read after the state: all fields final
          finished[job.id] = {
            state,
            failedReason: stored.failedReason || null,
            attemptsMade: stored.attemptsMade,
            data: stored.data,
          };
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const counts = await queue.getJobCounts("delayed", "completed", "failed", "waiting", "active");
    console.log(
      JSON.stringify({
        workers,
        deferred: {
          state: deferredState,
          timestamp: deferred.timestamp,
          delay: deferred.delay,
          resumeAtMs: deferred.data.resume_at_ms,
        },
        finished,
        counts,
      }),
    );
  } finally {
    await queue.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
