// Teams as device code sees them: strided sets of world PEs, read from the runtime's table.
#ifndef RSHMEM_TEAM_DEVICE_H
#define RSHMEM_TEAM_DEVICE_H

#include "device.h"

// Fills `t` for team id `team`; false for an id that names no team. TEAM_WORLD is derived from
// the state itself, so it works before the runtime has written any table.
RSHMEMI_DEV bool rshmemi_team_get(int team, rshmemi_team_desc_t* t) {
  const rshmemi_device_state_t* s = rshmemi_state();
  if (team == RSHMEM_TEAM_WORLD) {
    t->start = 0;
    t->stride = 1;
    t->size = s->n_pes;
    t->my_index = s->my_pe;
    return s->n_pes > 0;
  }
  if (team < 0 || team >= RSHMEM_MAX_TEAMS || s->team_table == 0) return false;
  *t = ((const rshmemi_team_desc_t*)(uintptr_t)s->team_table)[team];
  return t->size > 0 && t->stride > 0;
}

// World PE of member `index`.
RSHMEMI_DEV int rshmemi_team_member(const rshmemi_team_desc_t* t, int index) { return t->start + index * t->stride; }

// Index in `t` of world PE `pe`, or -1.
RSHMEMI_DEV int rshmemi_team_index_of(const rshmemi_team_desc_t* t, int pe) {
  const int d = pe - t->start;
  if (d < 0 || d % t->stride != 0) return -1;
  const int i = d / t->stride;
  return i < t->size ? i : -1;
}

RSHMEMI_DEV int32_t rshmemi_team_my_pe(int team) {
  rshmemi_team_desc_t t;
  return rshmemi_team_get(team, &t) ? t.my_index : -1;
}

RSHMEMI_DEV int32_t rshmemi_team_n_pes(int team) {
  rshmemi_team_desc_t t;
  return rshmemi_team_get(team, &t) ? t.size : -1;
}

// Index in `dest_team` of member `pe` of `src_team`, or -1 (as shmem_team_translate_pe).
RSHMEMI_DEV int32_t rshmemi_team_translate_pe(int src_team, int pe, int dest_team) {
  rshmemi_team_desc_t a, b;
  if (!rshmemi_team_get(src_team, &a) || !rshmemi_team_get(dest_team, &b)) return -1;
  if (pe < 0 || pe >= a.size) return -1;
  return rshmemi_team_index_of(&b, rshmemi_team_member(&a, pe));
}

#endif  // RSHMEM_TEAM_DEVICE_H
