"""Not the `rich` library: a stand-in that refuses to be imported, first on the path of every
process a test starts (`tests.support.procs.AS_INSTALLED`).

`rich` is in the test environment only because two test tools need it (import-linter and
schemathesis); no Coop dependency brings it, so an installed door, `coop serve`, notifier or
emulator never has it. structlog imports it when it can, at every start: 0.1-0.2 s of CPU per
process, hundreds of process starts in a run of the suite. With this module found first, the
import fails as it does on an install and structlog takes its plain path (this folder is no
package, so nothing else can import it by another name).
"""

raise ImportError("rich is not installed with Coop (tests.support.procs.AS_INSTALLED)")
