import { SHARD_COUNT } from '../notice/ids.js';
import type { StoredEntry } from '../store/notices.js';
import type { Archive } from './archive.js';
import { compareIds, idTime } from './names.js';

export interface ExportProgress {
  entries: number;
  objects: number;
  /** Time of the last entry written (ms), or the start of the period. */
  position: number;
}

/**
 * The archived decision log of every shard for [fromMs, toMs), merged into one stream ordered
 * by entry ID (shard order breaks ties). Reads one object per shard at a time, so memory stays
 * small whatever the period.
 */
export async function* exportEntries(
  archive: Archive,
  fromMs: number,
  toMs: number,
  onProgress?: (progress: ExportProgress) => void,
): AsyncGenerator<StoredEntry> {
  const progress: ExportProgress = { entries: 0, objects: 0, position: fromMs };
  const sources = Array.from({ length: SHARD_COUNT }, (_, shard) =>
    archive.entries(shard, fromMs, toMs, () => {
      progress.objects += 1;
      onProgress?.(progress);
    }),
  );
  const heads = await Promise.all(sources.map((source) => source.next()));
  for (;;) {
    let pick = -1;
    for (let i = 0; i < heads.length; i += 1) {
      const head = heads[i]!;
      if (head.done) continue;
      if (pick < 0 || compareIds(head.value.id, (heads[pick]!.value as StoredEntry).id) < 0) pick = i;
    }
    if (pick < 0) return;
    const entry = heads[pick]!.value as StoredEntry;
    progress.entries += 1;
    progress.position = idTime(entry.id);
    yield entry;
    heads[pick] = await sources[pick]!.next();
  }
}
