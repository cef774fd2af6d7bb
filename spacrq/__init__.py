"""spacrq — the overnight lab workstation.

Three kinds of unattended work, one window watching them:

* :mod:`spacrq.queue` — a persistent, validated, resumable queue of
  ``(module, settings)`` jobs, run one at a time;
* :mod:`spacrq.blockwise` — blockwise tasks over zarr volumes run by N worker
  processes, with a tracking store and an honest run report;
* :mod:`spacrq.experiments` — experiment modules run detached into run
  directories, stopped at a step boundary on request, resumed from their journal.

Files are the truth, processes do the work, the window watches and asks.
Nothing outside :mod:`spacrq.ui` imports Qt.
"""

__version__ = "0.2.0"
