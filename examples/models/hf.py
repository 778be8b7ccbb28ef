"""HuggingFace transformers' GPT2LMHeadModel and BertForMaskedLM built from tiny configs
with random weights (nothing is downloaded), with the zoo's common interface: two
entries, `hf.gpt2` and `hf.bert`, each a namespace like the zoo's model modules."""
import types

import torch


def _transformers():
    import transformers
    transformers.logging.set_verbosity_error()  # the tiny configs trip token-id warnings
    return transformers


def _gpt2_model(seed=0):
    t = _transformers()
    config = t.GPT2Config(vocab_size=256, n_positions=32, n_embd=64, n_layer=2, n_head=4,
                          bos_token_id=0, eos_token_id=0)
    torch.manual_seed(seed)
    return t.GPT2LMHeadModel(config)


def _gpt2_batch(batch, seq_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, 256, (batch, seq_len), generator=g)
    # the model shifts labels itself (ForCausalLMLoss)
    return {"input_ids": input_ids, "labels": input_ids.clone()}


def _gpt2_output(model, batch):
    return model(input_ids=batch["input_ids"]).logits


def _gpt2_loss(model, batch):
    return model(input_ids=batch["input_ids"], labels=batch["labels"]).loss


def _bert_model(seed=0):
    t = _transformers()
    config = t.BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=128, max_position_embeddings=64, pad_token_id=0)
    torch.manual_seed(seed)
    return t.BertForMaskedLM(config)


def _bert_batch(batch, seq_len, seed=0):
    from . import bert  # the same padded, masked batches as the zoo's own BERT
    return bert.make_batch(batch, seq_len, seed)


def _bert_output(model, batch):
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                 token_type_ids=batch["token_type_ids"]).logits


def _bert_loss(model, batch):
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                 token_type_ids=batch["token_type_ids"], labels=batch["labels"]).loss


def _adamw(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)


gpt2 = types.SimpleNamespace(
    __name__="hf.gpt2", SHAPES=[(4, 32), (2, 17), (3, 9)], make_model=_gpt2_model, make_batch=_gpt2_batch,
    make_optimizer=_adamw, output=_gpt2_output, loss=_gpt2_loss)

bert = types.SimpleNamespace(
    __name__="hf.bert", SHAPES=[(4, 24), (2, 13), (3, 32)], make_model=_bert_model, make_batch=_bert_batch,
    make_optimizer=_adamw, output=_bert_output, loss=_bert_loss)
