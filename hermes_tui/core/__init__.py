"""The data every part works on: messages and the transcript (``transcript``), what a
message holds besides text (``content_parts``), token counts (``tokens``) and the live
transcript that passes change (``conversation``); and the kinds of failure a model call reports
(``failures``)."""
