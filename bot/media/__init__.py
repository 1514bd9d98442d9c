"""What people send besides text: pictures for the model to see, voice to transcribe,
documents to read and keep.

``prepare.MediaIntake`` turns a turn's attachments into the model's input;
``images`` recognises pictures by content, ``audio`` recordings and their length,
``transcribe`` sends recordings to an OpenAI-compatible transcription endpoint,
``documents`` reads text files and PDFs, ``inbox`` saves documents in the workspace.
"""
