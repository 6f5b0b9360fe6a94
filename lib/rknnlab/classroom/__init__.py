"""A class: the labs graded with nbgrader.

* :mod:`.nbgrader_export` writes an nbgrader course directory from the labs
  (``python -m rknnlab nbgrader export``);
* :mod:`.grading` is what a graded cell calls in the grading kernel;
* :mod:`.nbgrader_autograde` is the step of ``nbgrader autograde`` that runs a submission
  (it needs nbgrader; the rest of rknnlab does not).

The class server (JupyterHub) is configuration only: ``deploy/jupyterhub/``.
"""
