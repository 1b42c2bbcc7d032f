package placement

// stampede's `locked-choice` fix variant, never part of E2B: PlaceSandbox holds this
// lock from the moment chooseNode starts reading scores until the chosen node's
// in-progress mark is taken, so a choice counts on its node before any other decision
// reads the scores.

import "sync"

var stampedeChoiceMu sync.Mutex
